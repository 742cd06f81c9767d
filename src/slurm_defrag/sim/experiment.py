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
    tasks: Sequence[Callable[[], T]],
    labels: Sequence[str],
    console: Console | None = None,
    on_result: Callable[[str, T], None] | None = None,
) -> list[T]:
    """Run every task in order, showing ``labels`` in a progress bar on stderr;
    ``on_result(label, result)`` after each (a grid of slow runs in the background, where
    no bar is drawn, can say what it has found so far)."""
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
            if on_result is not None:
                on_result(label, out[-1])
            bar.advance(t)
    return out
