"""``slurm-defrag top``: a live terminal view of GPU fragmentation, refreshed in place.

Each frame: the cluster's figures, the falsely starved jobs, the plans in progress and the
GPU map (see :mod:`slurm_defrag.report.top_view`). The first read must succeed (bad input
is one error line and a non-zero exit, like every command); after that a failing refresh,
e.g. a Slurm outage, is shown on a status line above the last good frame and retried at
the next interval. Ctrl-C exits with status 0.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from slurm_defrag.commands.common import SnapshotOpt
from slurm_defrag.errors import DefragError, InputError
from slurm_defrag.report.console import output_console

if TYPE_CHECKING:  # the view pulls in the store and pydantic: imported when used
    from slurm_defrag.report.top_view import TopFrame


def top(
    snapshot: SnapshotOpt = None,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="Database URL (sqlite:///PATH or postgresql+psycopg://...): "
            "show its latest stored snapshot and the plans in progress.",
        ),
    ] = None,
    live: Annotated[
        bool,
        typer.Option(
            "--live",
            help="Read the live cluster even with --db (plans still come from the database).",
        ),
    ] = False,
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            help="With --db: replay this moment of the stored history "
            "(ISO time, UTC unless it has an offset), e.g. 2026-11-29T12:00.",
        ),
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option("--cluster", help="With --db: this cluster (default: the last one saved)."),
    ] = None,
    interval: Annotated[
        float, typer.Option("--interval", "-n", min=0.2, help="Seconds between refreshes.")
    ] = 5.0,
    once: Annotated[
        bool, typer.Option("--once", help="Print one full frame and exit (scripts, tests).")
    ] = False,
    max_nodes: Annotated[
        int | None,
        typer.Option(
            "--max-nodes",
            min=1,
            help="Nodes in the GPU map at most "
            "(default: all with --once, else what fits the terminal).",
        ),
    ] = None,
) -> None:
    """Live view: GPU map, falsely starved jobs, plans in progress; refreshed in place."""
    from slurm_defrag.commands.top_sources import (
        FileSource,
        LiveSource,
        SnapshotSource,
        StoredSource,
        frame_reader,
        parse_at,
    )
    from slurm_defrag.store.database import Store

    moment = parse_at(at) if at is not None else None
    if moment is not None and (db is None or snapshot is not None or live):
        raise InputError("--at replays stored history: give --db URL, without --snapshot or --live")
    if cluster is not None and db is None:
        raise InputError("--cluster picks a cluster of the stored history: give --db URL")
    if snapshot is not None and live:
        raise InputError("--snapshot and --live name two sources: give one")
    store = Store.open(db) if db is not None else None
    try:
        source: SnapshotSource
        if snapshot is not None:
            source = FileSource(snapshot)
        elif store is not None and not live:
            source = StoredSource(store, cluster, moment)
        else:
            source = LiveSource()
        read = frame_reader(source, store, moment)
        if once:
            from slurm_defrag.report.top_view import render_frame

            output_console().print(render_frame(read(), max_nodes=max_nodes))
            return
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how one leaves: exit 0
            frame = read()  # outside the loop: a first failure is the usual one-line error
            _refresh(read, frame, interval, max_nodes)
    finally:
        if store is not None:
            store.close()


def _refresh(
    read: Callable[[], TopFrame], frame: TopFrame, interval: float, max_nodes: int | None
) -> None:
    """Redraw every ``interval`` seconds until interrupted."""
    from rich.live import Live

    from slurm_defrag.report.top_view import render_frame

    console = output_console()
    footer = f"every {interval:g} s · Ctrl-C quits"
    if not console.is_terminal:  # piped or logged: one full frame after another, like top -b
        while True:
            console.print(render_frame(frame, max_nodes=max_nodes))
            time.sleep(interval)
            frame = next_frame(read, frame, interval)
    # No auto-refresh thread: a frame changes only when it is read, so draw it then (and
    # fit it to the terminal's size of that moment).
    with Live(console=console, screen=True, auto_refresh=False) as view:
        while True:
            view.update(render_frame(frame, console=console, max_nodes=max_nodes,
                                     footer=footer), refresh=True)  # fmt: skip
            time.sleep(interval)
            frame = next_frame(read, frame, interval)


def next_frame(read: Callable[[], TopFrame], last: TopFrame, interval: float) -> TopFrame:
    """A fresh frame, or the last good one with a status line saying why there is none.

    Every user-facing error is kept on screen rather than ending the view: Slurm or the
    database may be back at the next try, and a snapshot file may be caught half-written.
    """
    try:
        return read()
    except DefragError as exc:
        now = datetime.now(UTC)
        return replace(
            last,
            status=f"{now:%H:%M:%S} refresh failed: {exc} -- showing "
            f"{last.refreshed_at:%H:%M:%S}, retrying every {interval:g} s",
        )
