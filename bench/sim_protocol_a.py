"""Benchmark: Protocol A (the FGD paper's) on Alibaba openb, all policies, 10 seeds.

    .venv/bin/python bench/sim_protocol_a.py [--seeds 10] [--out docs/img/sim]

Runs the grid twice: without topology (the paper's setting) and with the ``nvlink``
overlay and NVLink-bound multi-GPU jobs. Prints the rich tables, writes
``protocol_a_<overlay>.png`` and ``.json`` to ``--out``. One process, sequential.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console

from slurm_defrag.sim import report, suite


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--out", type=Path, default=Path("docs/img/sim"))
    ap.add_argument("--overlays", default="none,nvlink")
    args = ap.parse_args()
    console = Console()
    for overlay in args.overlays.split(","):
        s = suite.Suite(
            overlay=overlay, nvlink_jobs=overlay != "none", seeds=tuple(range(42, 42 + args.seeds))
        )
        t0 = time.perf_counter()
        runs = suite.protocol_a(s)
        took = time.perf_counter() - t0
        title = f"openb default, overlay {overlay}" + (", NVLink jobs" if s.nvlink_jobs else "")
        console.print(report.table_a(runs, f"Protocol A — {title}", show_paper=overlay == "none"))
        console.print(f"{len(runs)} runs in {took:.0f} s")
        report.plot_a(runs, args.out / f"protocol_a_{overlay}.png", f"Protocol A: {title}")
        (args.out / f"protocol_a_{overlay}.json").write_text(
            report.to_json("A", s.settings(), runs)
        )


if __name__ == "__main__":
    main()
