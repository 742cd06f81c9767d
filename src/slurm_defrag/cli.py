"""Command line: ``slurm-defrag frag | snapshot | ...``.

Every command turns a :class:`~slurm_defrag.errors.DefragError` into one line on stderr and a
non-zero exit; tracebacks are for bugs only.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from slurm_defrag import __version__
from slurm_defrag.errors import DefragError, InputError

app = typer.Typer(
    name="slurm-defrag",
    help="Measure and repair GPU fragmentation on Slurm clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


SnapshotOpt = Annotated[
    Path | None,
    typer.Option("--snapshot", "-s", help="Snapshot JSON file (default: read the live cluster)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]


@app.command()
def frag(
    snapshot: SnapshotOpt = None,
    json_out: JsonOpt = False,
    mix: Annotated[
        Path | None,
        typer.Option("--mix", help="Workload mix JSON to measure against (default: pending queue)."),
    ] = None,
    max_nodes: Annotated[
        int, typer.Option("--max-nodes", min=1, help="Nodes shown in the map and per job.")
    ] = 64,
) -> None:
    """Fragmentation per node, partition, GPU model and cluster; falsely starved jobs."""
    from slurm_defrag.metrics.compute import compute
    from slurm_defrag.metrics.demand import load_mix
    from slurm_defrag.report.frag_view import render

    snap = _load_snapshot(snapshot)
    report = compute(snap, load_mix(mix) if mix else None)
    if json_out:
        sys.stdout.write(report.model_dump_json(indent=1) + "\n")
        return
    render(Console(), snap, report, max_nodes)


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


def _load_snapshot(path: Path | None):  # type: ignore[no-untyped-def]
    from slurm_defrag.snapshot_file import load_snapshot

    if path is None:
        raise InputError("--snapshot: reading the live cluster is not available in this build")
    return load_snapshot(path)


def main() -> None:
    """Console entry point."""
    # Standalone mode handles usage errors and --help itself and lets other exceptions
    # through: ours become one line, anything else is a bug and keeps its traceback.
    try:
        app()
    except DefragError as exc:
        Console(stderr=True).print(f"[bold red]slurm-defrag: error:[/bold red] {exc}",
                                   highlight=False, soft_wrap=True, markup=True)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
