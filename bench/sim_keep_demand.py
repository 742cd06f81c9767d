"""Diagnosis: the demand job_submit.lua's ``short_first.keep`` window sees over a run.

    .venv/bin/python bench/sim_keep_demand.py [--workload multigpu50] [--load 0.9]
        [--seeds 6] [--first-seed 42]

Draws Protocol B's arrivals and time limits as ``sim_protocol_b.py --user-limits
--ckpt-share 0.25`` does, submits them in order to the real script (through lupa, its
clock at each submit time, examples/profiles/keep-scarce.toml) and reads, at each
measured submission,
the demand the script's own window holds (``D.keep_level``): the scarce jobs' limits (at
most the window) over the last ``KEEP_WINDOW_MIN`` minutes, per kept node-second. The
keeping is on where this is at or above the ``--keep-scarce`` demand (the profile's
``keep_scarce``: 0.5). No scheduling: the window depends on submissions only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from diagnosis_world import diagnosis_world, world_parser
from slurm_defrag.packing.node_levers import KEEP_WINDOW_MIN
from slurm_defrag.sim import protocol_b as pb
from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.configuration import from_profile
from slurm_defrag.sim.levers import KEEP_DEMAND, short_first_of
from slurm_defrag.sim.profile import load_profile
from slurm_defrag.sim.snapshot_view import PARTITION
from slurm_defrag.sim.submit_hook import SubmitHook, node_table
from slurm_defrag.sim.timed_workload import with_user_limits

KEEP_SCARCE = Path(__file__).resolve().parents[1] / "examples" / "profiles" / "keep-scarce.toml"


def main() -> None:
    args = world_parser(__doc__, "multigpu50", 0.9, 6).parse_args()
    nodes, trace, cfg = diagnosis_world(args.workload, args.load)
    mode = from_profile(load_profile(KEEP_SCARCE)).placement.mode
    assert mode is not None
    state = ClusterState(nodes)
    table = node_table(state, mode.lever, short_first=short_first_of(mode))
    kept = sum(t["nodes"] for t in table["partitions"][PARTITION]["types"] if t.get("kept"))
    print(f"{args.workload} {args.load}x: {kept} kept nodes, window {KEEP_WINDOW_MIN} min")
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        pool = pb.job_pool(trace, cfg.max_runtime)
        rate = pb.arrival_rate(pool, state.total_gpu_milli, cfg.load)
        jobs = pb.arrivals(pool, rate, cfg.horizon, np.random.default_rng(seed))
        jobs = with_user_limits(
            jobs, cfg.max_runtime, cfg.ckpt_share, np.random.default_rng([seed, 14])
        )
        hook = SubmitHook(table)  # an empty window, as after slurmctld loads the script
        levels = []
        for job in jobs:
            hook.answer(job)
            level = hook.keep_level(job.submit)
            if job.submit >= cfg.warmup and level is not None:
                levels.append(level)
        d = np.array(levels)
        print(
            f"seed {seed}: demand p5 {np.percentile(d, 5):.2f}, median {np.median(d):.2f}, "
            f"p95 {np.percentile(d, 95):.2f}, max {d.max():.2f}; at or above {KEEP_DEMAND} "
            f"on {np.mean(d >= KEEP_DEMAND):.0%} of the submissions"
        )


if __name__ == "__main__":
    main()
