"""Probe: how deep backfill looks (``bf_max_job_test``) against the queue order it walks.

    SLURM_DEFRAG_TRACES=../shared/traces PYTHONPATH=src .venv/bin/python bench/sim_bf_depth.py \
        [--workload multigpu50] [--load 1.2] [--seed 46] [--depths 100,500] \
        [--priority none,site] [--policy first-fit]

One Protocol B run per (priority, depth), as bench/sim_protocol_b.py runs them
(``--user-limits --backfill all --ckpt-share 0.25``) but for the backfill depth: the
simulator's default tests 100 pending jobs per pass, slurmctld's default 500. Under
fair-share the head of the queue is whatever the least-served users wait for; whether
backfill reaches past it decides what runs in the gaps. Prints GPU allocation, mean and
95th percentile wait and the seconds each run took.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import repo_traces  # noqa: F401  (sets SLURM_DEFRAG_TRACES for a checkout)
from slurm_defrag import suite
from slurm_defrag.sim.protocol_b import SettingsB, run_b
from slurm_defrag.sim.timed_workload import durations_by_gpus, scale_cluster
from slurm_defrag.traces import openb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--workload", default="multigpu50")
    ap.add_argument("--load", type=float, default=1.2)
    ap.add_argument("--seed", type=int, default=46)
    ap.add_argument("--depths", default="100,500")
    ap.add_argument("--priority", default="none,site")
    ap.add_argument("--policy", default="first-fit")
    args = ap.parse_args()
    s = suite.Suite(trace=args.workload, user_limits=True, backfill="all")
    nodes, jobs = suite.load(s)
    if jobs and not any(j.duration for j in jobs):  # as suite.protocol_b does
        import numpy as np

        jobs = durations_by_gpus(jobs, openb.load_pods("default"), np.random.default_rng(0))
    nodes = scale_cluster(nodes, s.scale)
    for priority in args.priority.split(","):
        for depth in (int(d) for d in args.depths.split(",")):
            cfg = SettingsB(
                load=args.load,
                horizon=s.horizon_h * 3600,
                warmup=s.warmup_h * 3600,
                max_runtime=s.max_runtime_h * 3600,
                engine=replace(suite.engine_config("all"), bf_max_job_test=depth),
                user_limits=True,
                ckpt_share=0.25,
                priority=priority,
            )
            r = run_b(nodes, jobs, args.policy, args.seed, cfg)
            print(
                f"{args.workload} {args.load}x seed {args.seed} {args.policy} priority "
                f"{priority:5} bf_max_job_test {depth:4}: GPU allocation "
                f"{r.gpu_alloc_pct:.1f} %, wait mean {r.wait_mean_s / 3600:.2f} h, p95 "
                f"{r.wait_p95_s / 3600:.2f} h, large {r.large_wait_mean_s / 3600:.2f} h "
                f"({r.wall_s:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
