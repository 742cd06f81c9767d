"""``slurm-defrag web``: the service's read-only page, served from a snapshot file or a
database, without Slurm and without the service (see docs/web.md)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from slurm_defrag.errors import InputError


def web(
    snapshot: Annotated[
        Path | None,
        typer.Option(
            "--snapshot",
            "-s",
            help="Snapshot JSON file to show, - for standard input (map and starving jobs; "
            "no history or plans).",
            readable=False,
        ),
    ] = None,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="Database URL to show: latest snapshot, history, plans "
            "(default without --snapshot: the store's default database).",
            show_default=False,
        ),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port; 0 picks a free one.")
    ] = 8788,
    allow: Annotated[
        list[str] | None,
        typer.Option("--allow", help="Network (CIDR) to serve besides loopback; repeatable."),
    ] = None,
    name: Annotated[
        list[str] | None,
        typer.Option(
            "--name",
            help="Host name the page is opened by, besides IP addresses, "
            "localhost and --host; repeatable.",
        ),
    ] = None,
) -> None:
    """Serve the web page (GPU map, starving jobs, history, plans) until Ctrl-C."""
    from pydantic import TypeAdapter, ValidationError

    from slurm_defrag.service.http import ControlServer, ListenError, Network
    from slurm_defrag.web.pages import web_pages
    from slurm_defrag.web.sources import FileSource, Source, StoreSource

    if snapshot is not None and db is not None:
        raise InputError("give --snapshot FILE or --db URL, not both")
    try:
        networks = TypeAdapter(list[Network]).validate_python(allow or [])
    except ValidationError as exc:
        bad = exc.errors(include_url=False)[0]
        raise InputError(f"--allow: {bad['input']!r} is not a network like 10.0.0.0/8") from None

    source: Source
    store = None
    if snapshot is not None:
        from slurm_defrag.snapshot_file import load_snapshot

        source = FileSource(load_snapshot(snapshot), snapshot)
    else:
        from slurm_defrag.store.database import Store

        store = Store.open(db)
        source = StoreSource(store)
    try:
        server = ControlServer(
            host, port, None, None, web_pages(source), allow=networks, names=name or ()
        )
    except ListenError as exc:
        if store is not None:
            store.close()
        raise exc.named("--host/--port") from None
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    typer.echo(f"serving {source.description} on {server.url} (Ctrl-C stops)")
    try:
        stop.wait()
    finally:
        server.close()
        if store is not None:
            store.close()
