"""Diagnosis: the demand job_submit.lua's ``short_first.keep`` window sees over a run.

    .venv/bin/python bench/sim_keep_demand.py [--workload multigpu50] [--load 0.9]
        [--seeds 6] [--first-seed 42]

Draws Protocol B's arrivals and time limits as ``sim_protocol_b.py --user-limits
--ckpt-share 0.25`` does, asks the real script (through lupa) which jobs are scarce
(tier 2, ``~short-all``) and fit a kept node type, as the script counts them, and at each
measured submission computes what the script's window holds: the scarce jobs' limits
(at most the window) over the last ``KEEP_WINDOW_MIN`` minutes, per kept node-second.
The keeping is on where this is at or above the ``--keep-scarce`` demand (the
simulator's ``~keep``: 0.5). No scheduling: the window depends on submissions only.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from diagnosis_world import diagnosis_world, world_parser
from slurm_defrag.planner.levers import KEEP_WINDOW_MIN, SHORT_FIRST_SPAN
from slurm_defrag.sim import protocol_b as pb
from slurm_defrag.sim.cluster import ClusterState
from slurm_defrag.sim.levers import KEEP_DEMAND, parse_mode, short_first_of
from slurm_defrag.sim.model import JobSpec
from slurm_defrag.sim.snapshot_view import PARTITION
from slurm_defrag.sim.submit_hook import SubmitHook, node_table
from slurm_defrag.sim.timed_workload import with_user_limits


def _fits(t: dict[str, object], job: JobSpec) -> bool:
    """Would ``job`` fit a node of type ``t`` (the script's ``fits``)?"""
    models = t["models"]
    assert isinstance(models, dict)
    have = (
        sum(models.get(m, 0) for m in job.gpu_models)
        if job.gpu_models is not None and len(job.gpu_models) == 1
        else t["gpus"]
    )
    return bool(
        have >= job.num_gpu
        and t["cpus"] >= -(-job.cpu_milli // 1000)  # type: ignore[operator]
        and t["mem"] >= job.memory_mib  # type: ignore[operator]
    )


def main() -> None:
    args = world_parser(__doc__, "multigpu50", 0.9, 6).parse_args()
    nodes, trace, cfg = diagnosis_world(args.workload, args.load)
    mode = parse_mode("slurm+shape-weights~short-all~keep-always")
    assert mode is not None
    state = ClusterState(nodes)
    table = node_table(state, mode.lever, short_first=short_first_of(mode))
    kept_types = [t for t in table["partitions"][PARTITION]["types"] if t.get("kept")]
    kept = sum(t["nodes"] for t in kept_types)
    hook = SubmitHook(table)
    window = KEEP_WINDOW_MIN * 60
    print(f"{args.workload} {args.load}x: {kept} kept nodes, window {KEEP_WINDOW_MIN} min")
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        pool = pb.job_pool(trace, cfg.max_runtime)
        rate = pb.arrival_rate(pool, state.total_gpu_milli, cfg.load)
        jobs = pb.arrivals(pool, rate, cfg.horizon, np.random.default_rng(seed))
        jobs = with_user_limits(
            jobs, cfg.max_runtime, cfg.ckpt_share, np.random.default_rng([seed, 14])
        )
        seen: deque[tuple[float, float]] = deque()
        asked = 0.0
        levels = []
        for job in jobs:
            scarce = -hook.answer(job).nice >= 2 * SHORT_FIRST_SPAN  # tier 2
            if scarce and any(_fits(t, job) for t in kept_types):  # as the script counts
                s = min(window, job.time_limit or window)
                seen.append((job.submit, s))
                asked += s
            while seen and seen[0][0] <= job.submit - window:
                asked -= seen.popleft()[1]
            if job.submit >= cfg.warmup:
                levels.append(asked / (kept * window))
        d = np.array(levels)
        print(
            f"seed {seed}: demand p5 {np.percentile(d, 5):.2f}, median {np.median(d):.2f}, "
            f"p95 {np.percentile(d, 95):.2f}, max {d.max():.2f}; at or above {KEEP_DEMAND} "
            f"on {np.mean(d >= KEEP_DEMAND):.0%} of the submissions"
        )


if __name__ == "__main__":
    main()
