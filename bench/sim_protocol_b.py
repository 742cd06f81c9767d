"""Benchmark: Protocol B (timed, with departures) on Alibaba openb at 0.9, 1.2, 1.5 x load.

    .venv/bin/python bench/sim_protocol_b.py [--seeds 2] [--out docs/img/sim]
        [--loads 0.9,1.2,1.5] [--policies ...] [--defrag none,planner-large] [--name protocol_b]
        [--profile examples/profiles/one-configuration.toml ...]
        [--workload default|multigpu50] [--user-limits] [--ckpt-share 0,0.25,0.5]
        [--backfill head|all] [--priority none|site]

1/8 of openb's nodes (every shape kept), 18 h of Poisson arrivals drawn from the trace,
run times capped at 6 h, the first 6 h (one maximal run time, to reach steady state) not
measured, then drained. Prints the rich table and writes ``protocol_b.png`` and ``.json``
to ``--out`` (and, while it runs, ``<name>.partial.jsonl``: one line per finished run).
One process, sequential. ``--user-limits``: time limits as users set them
(Tsafrir et al. 2005, see sim/timed_workload.py); ``--ckpt-share``: shares of jobs that
checkpoint every 30 min (a sweep); ``--priority site``: priority/multifactor with Fair Tree
over seeded users (sim/site_priority.py; default none: every job equal). The JSON holds
every run (per seed), with the tail and the mean wait per class of job.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

from rich.console import Console

import repo_traces  # noqa: F401  (sets SLURM_DEFRAG_TRACES for a checkout)
from slurm_defrag import suite
from slurm_defrag.sim import report
from slurm_defrag.sim.protocol_b import ResultB


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--seeds", type=int, default=2, help="how many seeds")
    ap.add_argument(
        "--first-seed", type=int, default=42, help="the first seed (to extend an earlier grid)"
    )
    ap.add_argument("--out", type=Path, default=Path("docs/img/sim"))
    ap.add_argument(
        "--policies",
        default=None,
        help="placement policies (default: all but slurm; none with --profile)",
    )
    ap.add_argument(
        "--profile",
        type=Path,
        action="append",
        default=[],
        help="a profile file (placement, lever, queue order, defrag step and limits); repeat",
    )
    ap.add_argument("--loads", default="0.9,1.2,1.5")
    ap.add_argument(
        "--defrag",
        default="none",
        help="defrag steps for --policies (comma list): none, planner, planner-large, "
        "planner-harm, planner-gain, planner-big, planner-wait, planner-drain, "
        "planner-gain-wait; their limits: a --profile's [defrag]",
    )
    ap.add_argument("--name", default="protocol_b", help="file name of the .png and .json")
    ap.add_argument("--workload", default="default", help="openb pod list: default, multigpu50")
    ap.add_argument("--user-limits", action="store_true", help="time limits as users set them")
    ap.add_argument("--ckpt-share", default="0", help="checkpointing shares (comma list)")
    ap.add_argument(
        "--backfill",
        default="head",
        choices=suite.BACKFILL,
        help="head: EASY; all: every tested job planned, as slurmctld (the cross-checked model)",
    )
    ap.add_argument(
        "--priority",
        default="none",
        help="none: every job equal (FIFO); site: priority/multifactor, fair-share dominant",
    )
    args = ap.parse_args()
    s = suite.Suite(
        trace=args.workload,
        user_limits=args.user_limits,
        ckpt_shares=tuple(float(x) for x in args.ckpt_share.split(",")),
        seeds=tuple(range(args.first_seed, args.first_seed + args.seeds)),
        policies=suite.policies_arg(args.policies, args.profile),
        loads=tuple(float(x) for x in args.loads.split(",")),
        defrag=tuple(args.defrag.split(",")),
        backfill=args.backfill,
        priority=args.priority,
    )
    s = suite.configured(s, args.profile)
    t0 = time.perf_counter()
    partial = args.out / f"{args.name}.partial.jsonl"
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_text("")

    def done(label: str, run: ResultB) -> None:
        # one line per finished run, so a long grid in the background shows its figures
        with partial.open("a") as f:
            f.write(json.dumps({"label": label, **asdict(run)}) + "\n")

    runs = suite.protocol_b(s, on_result=done)
    partial.unlink()
    took = time.perf_counter() - t0
    console = Console()
    for ckpt in s.ckpt_shares:
        mine = [r for r in runs if r.ckpt_share == ckpt]
        name = f"Protocol B — openb {args.workload}, 1/8 of the nodes, ckpt share {ckpt:g}"
        console.print(report.table_b(mine, name))
    console.print(f"{len(runs)} runs in {took:.0f} s")
    title = f"Protocol B: openb {args.workload}, 1/8 of the nodes"
    report.plot_b(runs, args.out / f"{args.name}.png", title)
    (args.out / f"{args.name}.json").write_text(report.to_json("B", s.settings(), runs))


if __name__ == "__main__":
    main()
