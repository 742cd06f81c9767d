"""Plot saved Protocol A results together (e.g. packing with and without defrag).

    .venv/bin/python bench/sim_plot_a.py OUT.png RESULTS.json [RESULTS.json ...] \\
        [--policies packing] [--title TEXT]

Reads the JSON files that ``bench/sim_protocol_a.py`` writes and draws their curves (mean
over seeds, one per policy and defrag step) in one figure.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import fields
from pathlib import Path
from typing import Any

from slurm_defrag.sim import report
from slurm_defrag.sim.protocol_a import ResultA


def load(path: Path, policies: set[str] | None) -> list[ResultA]:
    names = {f.name for f in fields(ResultA)}
    runs = []
    for raw in json.loads(path.read_text())["runs"]:
        if policies is None or raw["policy"] in policies:
            kept: dict[str, Any] = {
                k: tuple(v) if isinstance(v, list) else v for k, v in raw.items() if k in names
            }
            runs.append(ResultA(**kept))
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("results", type=Path, nargs="+")
    ap.add_argument("--policies", default=None, help="comma list; default: all")
    ap.add_argument("--title", default="Protocol A: openb default, no topology")
    args = ap.parse_args()
    policies = set(args.policies.split(",")) if args.policies else None
    runs = [r for path in args.results for r in load(path, policies)]
    report.plot_a(runs, args.out, args.title)


if __name__ == "__main__":
    main()
