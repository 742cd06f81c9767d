"""Command line entry point: ``slurm-defrag <command>``.

Commands live in :mod:`slurm_defrag.commands`, one module per group, listed in
:data:`COMMANDS` and imported only when run: ``slurm-defrag --help`` loads typer and rich,
``slurm-defrag history`` the history command's module and what it needs, nothing of the
planner or the service (issue #42: importing every command module at start-up loaded 346
modules for ``--help``). Every :class:`~slurm_defrag.errors.DefragError` becomes one line
on stderr and a non-zero exit; a traceback means a bug.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup

if TYPE_CHECKING:
    # the click typer runs on (its own copy since typer 0.2x): for the annotations only
    from typer._click import Command, Context

from slurm_defrag import __version__
from slurm_defrag.errors import DefragError


@dataclass(frozen=True)
class Lazy:
    """A command (or a group of them) of ``slurm_defrag.commands.<module>``."""

    module: str
    help: str
    """The line ``--help`` lists it with: the first paragraph of its own help, copied so
    that listing it needs no import (tests/commands/test_cli_lazy.py holds them equal)."""
    group: bool = False
    """``<module>.app`` is a typer sub-app; else ``<module>.<name>`` is the command."""


COMMANDS: dict[str, Lazy] = {
    # in the order --help lists them (as the eager registration did)
    "frag": Lazy("frag", "Fragmentation per node, partition, GPU model and cluster; falsely "
                 "starved jobs."),
    "simulate": Lazy("simulate", "Replay Alibaba openb against Slurm-like placement policies "
                     "(see docs/benchmarks.md)."),
    "plan": Lazy("plan", "Preview the cheapest requeues/drains that start starved GPU jobs, "
                 "with before/after maps."),
    "history": Lazy("history", "Fragmentation history: worst nodes, worst hours, wasted GPU "
                    "memory."),
    "snapshot": Lazy("snapshot", "Read the live cluster: nodes, jobs with per-node GPU "
                     "indices, reservations."),
    "serve": Lazy("serve", "Run the defragmentation service: read, store, plan and "
                  "(mode=enforce) act."),
    "web": Lazy("web", "Serve the web page (GPU map, starving jobs, history, plans) until "
                "Ctrl-C."),
    "top": Lazy("top", "Live view: GPU map, falsely starved jobs, plans in progress; "
                "refreshed in place."),
    "doctor": Lazy("doctor", "Check Slurm, the backend, rights, topology, hooks, database, "
                   "clock and switches."),
    "db": Lazy("db", "The database: migrate its schema, show its state, prune old history.",
               group=True),
    "report": Lazy("report", "Reports from the stored history: what the service did (impact), "
                   "why the cluster fragments (causes).", group=True),
    "plugins": Lazy("plugins", "Slurm-side hooks (slurm-plugins/): generate what "
                    "job_submit.lua reads.", group=True),
    "topology": Lazy("topology", "Collect the NVLink topology on a GPU node (AutoDetect=nvml "
                     "sites).", group=True),
}  # fmt: skip


def load(name: str) -> Command:
    """The real click command of ``COMMANDS[name]``: its module imported, typer-converted."""
    spec = COMMANDS[name]
    module = importlib.import_module(f"slurm_defrag.commands.{spec.module}")
    if spec.group:
        # get_group, not get_command: a sub-app with one command stays a group
        command: Command = typer.main.get_group(module.app)
    else:
        single = typer.Typer()
        single.command(name=name)(getattr(module, name))
        command = typer.main.get_command(single)
    command.name = name
    return command


class LazyGroup(TyperGroup):
    """Lists :data:`COMMANDS` by their help line; imports one only to run it (or to show
    its own help, complete its options: anything that resolves it)."""

    def list_commands(self, ctx: Context) -> list[str]:
        names = list(COMMANDS)
        # the commands defined here (version) where the eager registration had them
        return names[: names.index("db")] + super().list_commands(ctx) + names[names.index("db") :]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        spec = COMMANDS.get(cmd_name)
        if spec is None:
            return super().get_command(ctx, cmd_name)
        # A placeholder: what a listing reads (name, help line), without the import.
        return TyperCommand(cmd_name, help=spec.help)

    def resolve_command(
        self, ctx: Context, args: list[str]
    ) -> tuple[str | None, Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if name in COMMANDS:
            command = load(name)
        return name, command, rest


app = typer.Typer(
    cls=LazyGroup,
    name="slurm-defrag",
    help="Measure and repair GPU fragmentation on Slurm clusters.",
    no_args_is_help=True,
    # --install-completion / --show-completion (bash, zsh, fish) come from typer.
    add_completion=True,
    pretty_exceptions_enable=False,
)


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
        from rich.console import Console
        from rich.text import Text

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
