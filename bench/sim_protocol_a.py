"""Benchmark: Protocol A (the FGD paper's) on Alibaba openb, all policies, 10 seeds.

    .venv/bin/python bench/sim_protocol_a.py [--seeds 10] [--out docs/img/sim]
        [--overlays none,nvlink] [--policies ...] [--defrag none,planner]
        [--requeue-cap step|total] [--name protocol_a]
        [--profile examples/profiles/fgd-route-score-30.toml ...] [--whole-cpus]

Runs the grid once per overlay: without topology (the paper's setting) and with the
``nvlink`` overlay and NVLink-bound multi-GPU jobs. Prints the rich tables (and the defrag
table when a defrag step ran), writes ``<name>_<overlay>.png`` and ``.json`` to ``--out``.
One process, sequential.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console

import repo_traces  # noqa: F401  (sets SLURM_DEFRAG_TRACES for a checkout)
from slurm_defrag import suite
from slurm_defrag.sim import report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--out", type=Path, default=Path("docs/img/sim"))
    ap.add_argument("--overlays", default="none,nvlink")
    ap.add_argument(
        "--policies",
        default=None,
        help="placement policies (default: all but slurm; none with --profile)",
    )
    ap.add_argument("--defrag", default="none", help="none, planner (comma list)")
    ap.add_argument(
        "--profile",
        type=Path,
        action="append",
        default=[],
        help="a profile file (lever, its cycle, defrag); repeat for several",
    )
    ap.add_argument("--requeue-cap", default="step", choices=("step", "total"))
    ap.add_argument("--name", default="protocol_a", help="file name stem of the .png and .json")
    ap.add_argument(
        "--whole-cpus",
        action="store_true",
        help="round every job's CPUs up to whole CPUs, as Slurm allocates them",
    )
    args = ap.parse_args()
    policies = suite.policies_arg(args.policies, args.profile)
    console = Console(width=160)
    for overlay in args.overlays.split(","):
        s = suite.Suite(
            overlay=overlay,
            nvlink_jobs=overlay != "none",
            seeds=tuple(range(42, 42 + args.seeds)),
            policies=tuple(policies),
            defrag=tuple(args.defrag.split(",")),
            requeue_cap=args.requeue_cap,
            whole_cpus=args.whole_cpus,
        )
        s = suite.configured(s, args.profile)
        t0 = time.perf_counter()
        runs = suite.protocol_a(s)
        took = time.perf_counter() - t0
        title = f"openb default, overlay {overlay}" + (", NVLink jobs" if s.nvlink_jobs else "")
        title += ", whole CPUs" if s.whole_cpus else ""
        console.print(report.table_a(runs, f"Protocol A — {title}", show_paper=overlay == "none"))
        if any(r.defrag != "none" for r in runs):
            console.print(report.table_a_defrag(runs, f"Protocol A with defrag — {title}"))
        console.print(f"{len(runs)} runs in {took:.0f} s")
        stem = f"{args.name}_{overlay}"
        report.plot_a(runs, args.out / f"{stem}.png", f"Protocol A: {title}")
        (args.out / f"{stem}.json").write_text(report.to_json("A", s.settings(), runs))


if __name__ == "__main__":
    main()
