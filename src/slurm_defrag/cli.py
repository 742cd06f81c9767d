"""Command line entry point: ``slurm-defrag <command>``.

Commands live in :mod:`slurm_defrag.commands`, one module per group, registered below.
Every :class:`~slurm_defrag.errors.DefragError` becomes one line on stderr and a non-zero
exit; a traceback means a bug.
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.text import Text

from slurm_defrag import __version__
from slurm_defrag.commands import (
    db,
    doctor,
    frag,
    history,
    plan,
    plugins,
    serve,
    simulate,
    snapshot,
    top,
    topology,
    web,
)
from slurm_defrag.errors import DefragError

app = typer.Typer(
    name="slurm-defrag",
    help="Measure and repair GPU fragmentation on Slurm clusters.",
    no_args_is_help=True,
    # --install-completion / --show-completion (bash, zsh, fish) come from typer.
    add_completion=True,
    pretty_exceptions_enable=False,
)

app.command()(frag.frag)
app.command()(simulate.simulate)
app.command()(plan.plan)
app.add_typer(db.app, name="db")
app.command()(history.history)
app.command()(snapshot.snapshot)
app.add_typer(plugins.app, name="plugins")
app.command()(serve.serve)
app.command()(web.web)
app.command()(top.top)
app.add_typer(topology.app, name="topology")
app.command()(doctor.doctor)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"slurm-defrag {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        "-V",
        callback=_print_version,
        is_eager=True,
        help="Print the version and exit.",
    ),
) -> None:
    """Measure and repair GPU fragmentation on Slurm clusters."""


@app.command()
def version() -> None:
    """Print the version (same as --version)."""
    typer.echo(f"slurm-defrag {__version__}")


def main() -> None:
    """Console entry point."""
    # Standalone mode handles usage errors and --help itself and lets other exceptions
    # through: ours become one line, anything else is a bug and keeps its traceback.
    try:
        # one name however it is started (entry point or python -m), so completion and
        # usage lines say slurm-defrag
        app(prog_name="slurm-defrag")
    except DefragError as exc:
        # Text, not markup: messages contain JSON paths like nodes[0] that rich would eat;
        # cleaned: they may quote Slurm output or file contents (terminal controls), and a
        # message is one line by contract.
        from slurm_defrag.report.safe_text import clean

        Console(stderr=True).print(
            Text.assemble(("slurm-defrag: error: ", "bold red"), clean(str(exc))),
            soft_wrap=True,
        )
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
