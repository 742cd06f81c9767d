"""Diagnosis: which jobs carry Protocol B's wait, and can the nodes that fit them hold them?

    .venv/bin/python bench/sim_wait_by_shape.py [--workload multigpu50] [--load 0.9]
        [--seeds 6] [--first-seed 42] [--policies first-fit]
        [--profile examples/profiles/shape-weights.toml ...]

Replays Protocol B as ``sim_protocol_b.py --backfill all --user-limits --ckpt-share 0.25``
does (no defrag) and splits the measured jobs' wait by request: CPU-only, k whole GPUs,
a share of one GPU, and "8 GPUs, big": 8-GPU jobs asking for more CPUs or memory than
most 8-GPU nodes have, which only the few largest nodes can hold. For those it also
prints their demand (node-hours of run time arriving in the horizon) against the
node-hours those nodes offer: above 1, that sub-queue grows for the whole run whatever
the levers do, and its wait is a floor under the large-job mean.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from diagnosis_world import diagnosis_world, world_parser
from slurm_defrag.sim import protocol_b as pb
from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.configuration import placements
from slurm_defrag.sim.engine import EngineStats
from slurm_defrag.sim.model import JobSpec, NodeSpec
from slurm_defrag.sim.protocol_b import LARGE_GPUS

PROFILES = Path(__file__).resolve().parents[1] / "examples" / "profiles"

WHOLE = 1000
BIG = "8 big"


def _typical_8gpu_node(nodes: list[NodeSpec]) -> NodeSpec:
    """The most common 8-GPU node shape (openb: 96 CPUs, 384 GiB)."""
    shapes: dict[tuple[int, int], list[NodeSpec]] = defaultdict(list)
    for n in nodes:
        if n.gpus == 8:
            shapes[(n.cpu_milli, n.memory_mib)].append(n)
    return max(shapes.values(), key=len)[0]


def _kind(job: JobSpec, typical: NodeSpec) -> str:
    if job.num_gpu == 0:
        return "cpu"
    if job.gpu_milli < WHOLE:
        return "share"
    if job.num_gpu == 8 and (
        job.cpu_milli > typical.cpu_milli or job.memory_mib > typical.memory_mib
    ):
        return BIG
    return f"{job.num_gpu} GPU"


def _capture() -> dict[str, object]:
    """Patch the engine so the last run's jobs and records can be read back."""
    seen: dict[str, object] = {}

    class Capture(pb.Engine):
        def run(self) -> EngineStats:
            stats = super().run()
            seen["jobs"], seen["stats"] = self.jobs, stats
            return stats

    pb.Engine = Capture  # type: ignore[misc]
    return seen


def main() -> None:
    ap = world_parser(__doc__, "multigpu50", 0.9, 6)
    ap.add_argument("--policies", default="first-fit", help="registered placement policies")
    ap.add_argument("--profile", type=Path, action="append", help="profile files (repeat)")
    args = ap.parse_args()
    runs = placements(args.policies.split(","), args.profile or [PROFILES / "shape-weights.toml"])
    nodes, jobs, settings = diagnosis_world(args.workload, args.load)
    typical = _typical_8gpu_node(nodes)
    holders = [
        n
        for n in nodes
        if n.gpus == 8 and n.cpu_milli > typical.cpu_milli and n.memory_mib > typical.memory_mib
    ]
    print(
        f"{args.workload} {args.load}x; '{BIG}': 8 GPUs and more than "
        f"{typical.cpu_milli // 1000} CPUs or {typical.memory_mib // 1024} GiB, which "
        f"{len(holders)} of the {sum(n.gpus == 8 for n in nodes)} 8-GPU nodes can hold"
    )
    seen = _capture()
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        # demand of the big 8-GPU jobs, from the same arrivals run_b draws
        pool = pb.job_pool(jobs, settings.max_runtime)
        rate = pb.arrival_rate(pool, ClusterState(nodes).total_gpu_milli, settings.load)
        arrived = pb.arrivals(pool, rate, settings.horizon, np.random.default_rng(seed))
        big_h = sum(j.duration for j in arrived if _kind(j, typical) == BIG) / 3600
        offered = len(holders) * settings.horizon / 3600
        print(
            f"seed {seed}: big 8-GPU demand {big_h:.0f} node-h / {offered:.0f} = "
            f"{big_h / offered:.2f} of their nodes"
        )
        for policy in runs:
            res = pb.run_b(nodes, jobs, policy, seed, settings)
            by: dict[str, list[float]] = defaultdict(list)
            records = seen["stats"].records  # type: ignore[attr-defined]
            end = seen["stats"].end_time  # type: ignore[attr-defined]
            large = 0.0
            for job, rec in zip(seen["jobs"], records, strict=True):  # type: ignore[call-overload]
                if not settings.warmup <= job.submit < settings.horizon:
                    continue
                w = (end - job.submit) if rec.end is None else rec.end - job.submit - job.duration
                by[_kind(job, typical)].append(w / 3600)
                large += w / 3600 if job.num_gpu >= LARGE_GPUS else 0.0
            parts = " | ".join(
                f"{k}: {np.mean(v):.2f} h x {len(v)}"
                for k, v in sorted(by.items(), key=lambda kv: kv[0])
            )
            big_share = sum(by[BIG]) / large if large else 0.0
            print(
                f"  {policy.name}: large {res.large_wait_mean_s / 3600:.2f} h, all "
                f"{res.wait_mean_s / 3600:.3f} h; big 8-GPU jobs carry {big_share:.0%} of the "
                f"large jobs' wait | {parts}"
            )


if __name__ == "__main__":
    main()
