"""Grids of runs (policies x seeds [x loads]) with a progress bar, one process.

Runs are sequential on purpose: the project's machines are shared, and a run is fast
enough (seconds) that a grid takes minutes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

T = TypeVar("T")


def run_grid(
    tasks: Sequence[Callable[[], T]], labels: Sequence[str], console: Console | None = None
) -> list[T]:
    """Run every task in order, showing ``labels`` in a progress bar on stderr."""
    out: list[T] = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console or Console(stderr=True),
        transient=True,
    ) as bar:
        t = bar.add_task("simulating", total=len(tasks))
        for label, task in zip(labels, tasks, strict=True):
            bar.update(t, description=label)
            out.append(task())
            bar.advance(t)
    return out
