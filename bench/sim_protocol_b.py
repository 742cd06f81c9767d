"""Benchmark: Protocol B (timed, with departures) on Alibaba openb at 0.9, 1.2, 1.5 x load.

    .venv/bin/python bench/sim_protocol_b.py [--seeds 2] [--out docs/img/sim]
        [--loads 0.9,1.2,1.5] [--policies ...] [--defrag none,planner-large] [--name protocol_b]

1/8 of openb's nodes (every shape kept), 18 h of Poisson arrivals drawn from the trace,
run times capped at 6 h, the first 6 h (one maximal run time, to reach steady state) not
measured, then drained. Prints the rich table and writes ``protocol_b.png`` and ``.json``
to ``--out``. One process, sequential.
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
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("docs/img/sim"))
    ap.add_argument("--policies", default=",".join(suite.DEFAULT_POLICIES))
    ap.add_argument("--loads", default="0.9,1.2,1.5")
    ap.add_argument("--defrag", default="none", help="none, planner, planner-large (comma list)")
    ap.add_argument("--name", default="protocol_b", help="file name of the .png and .json")
    args = ap.parse_args()
    s = suite.Suite(
        seeds=tuple(range(42, 42 + args.seeds)),
        policies=tuple(args.policies.split(",")),
        loads=tuple(float(x) for x in args.loads.split(",")),
        defrag=tuple(args.defrag.split(",")),
    )
    t0 = time.perf_counter()
    runs = suite.protocol_b(s)
    took = time.perf_counter() - t0
    console = Console()
    console.print(report.table_b(runs, "Protocol B — openb default, 1/8 of the nodes"))
    console.print(f"{len(runs)} runs in {took:.0f} s")
    title = "Protocol B: openb default, 1/8 of the nodes"
    report.plot_b(runs, args.out / f"{args.name}.png", title)
    (args.out / f"{args.name}.json").write_text(report.to_json("B", s.settings(), runs))


if __name__ == "__main__":
    main()
