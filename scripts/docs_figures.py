#!/usr/bin/env python3
"""Draw the figures of docs/metrics.md and docs/planner.md with slurm-defrag's own renderers.

Each figure is a real command on a bundled example, run with colour on, and its terminal
output saved as SVG by rich (the library that drew it), so the pictures are exactly what an
admin sees and change when the renderers do. Run from the repository root:

    .venv/bin/python scripts/docs_figures.py        # writes docs/img/*.svg
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "img"
WIDTH = 112

# (file, title, argv after `slurm-defrag`, keep the lines from the first that starts with
# this marker, or everything when None)
FIGURES = [
    (
        "gpu-map-course.svg",
        "frag: the course cluster's GPU map",
        ["frag", "--snapshot", "examples/course.json"],
        "GPU map",
    ),
    (
        "three-kinds.svg",
        "frag: spatial, topology and configuration fragmentation",
        ["frag", "--snapshot", "examples/course.json", "--mix", "examples/mix-a100x3.json"],
        None,
    ),
    (
        "requeue-set.svg",
        "plan: the cheapest requeue set for job 110, before and after",
        ["plan", "--snapshot", "examples/course.json"],
        None,
    ),
]


def run(argv: list[str]) -> str:
    env = {**os.environ, "FORCE_COLOR": "1", "COLUMNS": str(WIDTH), "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    out = subprocess.run([sys.executable, "-m", "slurm_defrag", *argv], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True, timeout=300)  # fmt: skip
    return out.stdout


def crop(ansi: str, marker: str | None) -> str:
    if marker is None:
        return ansi
    lines = ansi.splitlines()
    start = next(i for i, ln in enumerate(lines) if Text.from_ansi(ln).plain.startswith(marker))
    return "\n".join(lines[start:])


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, title, argv, marker in FIGURES:
        console = Console(record=True, width=WIDTH, file=open(os.devnull, "w"))  # noqa: SIM115
        console.print(Text.from_ansi(crop(run(argv), marker)), soft_wrap=True)
        console.save_svg(str(OUT / name), title=f"slurm-defrag {title}")
        print(f"wrote {OUT / name}")


if __name__ == "__main__":
    main()
