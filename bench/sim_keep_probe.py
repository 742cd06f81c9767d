"""Diagnosis: who uses the nodes only the "8 big" jobs hold, and what keeping others off gives.

    .venv/bin/python bench/sim_keep_probe.py [--workload multigpu50] [--load 0.9]
        [--seeds 1] [--first-seed 44] [--profile examples/profiles/short-first-all.toml]

Replays Protocol B as ``sim_protocol_b.py --backfill all --user-limits --ckpt-share 0.25``
does (no defrag). Per seed: (1) the job-hours each kind of job (``sim_wait_by_shape.py``'s
kinds) ran on the nodes only "8 big" jobs fit, and how many of them while an "8 big" job
waited (sampled every 10 minutes); (2) large-job and all-jobs mean wait as ratios to first
fit, with the policy as it is, with every other job kept off those nodes while an "8 big"
job is pending (what a reservation held for them would do), and always. (2) patches
``ClusterState.feasible``: a probe of what a lever could give, not a lever.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from diagnosis_world import diagnosis_world, world_parser
from sim_wait_by_shape import BIG, _capture, _kind, _typical_8gpu_node
from slurm_defrag.sim import protocol_b as pb
from slurm_defrag.sim.cluster_state import BoolArray, ClusterState
from slurm_defrag.sim.configuration import placements
from slurm_defrag.sim.model import JobSpec

PROFILES = Path(__file__).resolve().parents[1] / "examples" / "profiles"

SAMPLE_S = 600


def _use(seen: dict[str, object], holders: set[int], typical: object) -> str:
    """Job-hours on the holder nodes per kind, and of those while an "8 big" job waited."""
    jobs, stats = seen["jobs"], seen["stats"]
    end = stats.end_time  # type: ignore[attr-defined]
    pairs = list(zip(jobs, stats.records, strict=True))  # type: ignore[call-overload]
    waits = [
        (j.submit, r.first_start if r.first_start is not None else end)
        for j, r in pairs
        if _kind(j, typical) == BIG  # type: ignore[arg-type]
    ]
    used: dict[str, float] = defaultdict(float)
    blocking: dict[str, float] = defaultdict(float)
    for j, r in pairs:
        if r.first_start is None or r.placement is None or r.placement.node not in holders:
            continue
        stop = r.end if r.end is not None else end
        kind = _kind(j, typical)  # type: ignore[arg-type]
        used[kind] += (stop - r.first_start) / 3600
        for t in np.arange(r.first_start, stop, SAMPLE_S):
            if any(a <= t < b for a, b in waits):
                blocking[kind] += min(SAMPLE_S, stop - t) / 3600
    return ", ".join(f"{k} {used[k]:.0f} job-h ({blocking[k]:.0f} while one waited)" for k in used)


def main() -> None:
    ap = world_parser(__doc__, "multigpu50", 0.9, 1)
    ap.set_defaults(first_seed=44)
    ap.add_argument("--profile", type=Path, default=PROFILES / "short-first-all.toml")
    args = ap.parse_args()
    (placement,) = placements((), [args.profile])
    nodes, jobs, settings = diagnosis_world(args.workload, args.load)
    typical = _typical_8gpu_node(nodes)
    holder_mask = np.array(
        [
            n.gpus == 8 and n.cpu_milli > typical.cpu_milli and n.memory_mib > typical.memory_mib
            for n in nodes
        ]
    )
    holders = {int(i) for i in np.flatnonzero(holder_mask)}
    seen = _capture()
    original = ClusterState.feasible

    def kept_off(when: Callable[[], bool]) -> Callable[[ClusterState, JobSpec], BoolArray]:
        def feasible(state: ClusterState, job: JobSpec) -> BoolArray:
            ok = original(state, job)
            if state.size == len(nodes) and _kind(job, typical) != BIG and when():
                ok = ok & ~holder_mask
            return ok

        return feasible

    def big_pending() -> bool:
        engine = seen.get("engine")
        big = seen.get("big", set())
        return engine is not None and any(jid in big for _, _, jid in engine.pending)  # type: ignore[attr-defined, operator]

    class Watch(pb.Engine):  # the running engine, for "pending" (after _capture's class)
        def run(self):  # type: ignore[no-untyped-def]
            seen["engine"] = self
            seen["big"] = {i for i, j in enumerate(self.jobs) if _kind(j, typical) == BIG}
            return super().run()

    pb.Engine = Watch  # type: ignore[misc]
    print(f"{args.workload} {args.load}x, {placement.name}; holder nodes {sorted(holders)}")
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        ClusterState.feasible = original  # type: ignore[method-assign]
        ff = pb.run_b(nodes, jobs, "first-fit", seed, settings)
        ratios = []
        for label, patch in (
            ("as is", original),
            ("kept off while an 8 big job is pending", kept_off(big_pending)),
            ("kept off always", kept_off(lambda: True)),
        ):
            ClusterState.feasible = patch  # type: ignore[method-assign]
            res = pb.run_b(nodes, jobs, placement, seed, settings)
            if label == "as is":
                print(f"seed {seed}: on the holders: {_use(seen, holders, typical)}")
            ratios.append(
                f"{label} {res.large_wait_mean_s / ff.large_wait_mean_s:.2f} / "
                f"{res.wait_mean_s / ff.wait_mean_s:.2f}"
            )
        ClusterState.feasible = original  # type: ignore[method-assign]
        print(f"seed {seed}: large / all vs first fit: " + "; ".join(ratios))


if __name__ == "__main__":
    main()
