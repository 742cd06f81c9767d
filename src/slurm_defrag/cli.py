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
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.completion
import typer.main
from typer import _completion_classes
from typer.core import TyperCommand, TyperGroup, TyperOption

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
    "demo": Lazy("demo", "Run the whole loop offline: a simulated cluster, the service acting "
                 "on it, the web page."),
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
        # no completion options of its own: the root's --show-completion serves all
        single = typer.Typer(add_completion=False)
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
    # Ours below: typer's --show-completion took the shell from the parent process and
    # ignored the one named (--show-completion zsh printed bash's script in bash).
    add_completion=False,
    # -h as well as --help, on every command (subcommand contexts inherit it)
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)
# The shells' completion protocols, which typer registers only with its own options
# (typer has no public name for this step).
_completion_classes.completion_init()


def _no_flag_placeholder() -> None:
    """typer (0.29) shows a ``<bool>`` type beside every flag, ``--help`` included, as if
    it took a value: a flag shows none (what click always did)."""
    shown = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx: Context) -> str | None:
        if self.is_flag and self.metavar is None:
            return None
        return shown(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_no_flag_placeholder()


class Shell(StrEnum):
    """Shells whose completion script ``--show-completion`` prints."""

    bash = "bash"
    zsh = "zsh"
    fish = "fish"
    powershell = "powershell"
    pwsh = "pwsh"


def version_lines() -> list[str]:
    """slurm-defrag's version, then OR-Tools' (the solver plans depend on) and the Slurm
    client's on PATH (``sinfo --version``, through the Slurm adapter: argv, a timeout;
    none is fine)."""
    from importlib.metadata import PackageNotFoundError, version

    from slurm_defrag.slurm.command_runner import client_version

    try:
        ortools = f"OR-Tools {version('ortools')}"
    except PackageNotFoundError:
        ortools = "OR-Tools: not installed"
    slurm = client_version()
    return [
        f"slurm-defrag {__version__}",
        ortools,
        f"Slurm {slurm} (sinfo --version)" if slurm else "Slurm: no sinfo on PATH",
    ]


def _print_version(value: bool) -> None:
    if value:
        typer.echo("\n".join(version_lines()))
        raise typer.Exit()


LOG_LEVELS = ("debug", "info", "warning", "error")


def _complete_level(incomplete: str) -> list[str]:
    return [level for level in LOG_LEVELS if level.startswith(incomplete.lower())]


def _log_level(level: str | None, verbose: int) -> str | None:
    """The level asked for (None: leave logging as it is): --log-level wins over -v."""
    if level is not None:
        if level.lower() not in LOG_LEVELS:
            from slurm_defrag.errors import InputError

            raise InputError(
                f"--log-level (or SLURM_DEFRAG_LOG_LEVEL) {level!r}: choose one of "
                + ", ".join(LOG_LEVELS)
            )
        return level.upper()
    if verbose:
        return "DEBUG" if verbose > 1 else "INFO"
    return None


def _show_completion(ctx: typer.Context, param: Any, value: Shell | None) -> None:
    if value is not None:
        typer.completion.show_callback(ctx, param, value.value)  # prints it and exits


def _install_completion(ctx: typer.Context, param: Any, value: bool) -> None:
    if value:
        typer.completion.install_callback(ctx, param, value)  # the shell it runs in


@app.callback()
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False,
        "--version",
        "-V",
        callback=_print_version,
        is_eager=True,
        help="Print the version and exit.",
    ),
    show_completion: Annotated[
        Shell | None,
        typer.Option(
            "--show-completion",
            metavar="SHELL",
            callback=_show_completion,
            is_eager=True,
            expose_value=False,
            help="Print the completion script of SHELL (bash, zsh, fish, powershell) and exit.",
        ),
    ] = None,
    install_completion: Annotated[
        bool,
        typer.Option(
            "--install-completion",
            callback=_install_completion,
            is_eager=True,
            expose_value=False,
            help="Install completion for the shell this runs in (bash, zsh, fish) and exit.",
        ),
    ] = False,
    log_level: Annotated[
        str | None,
        typer.Option(
            "--log-level",
            metavar="LEVEL",
            envvar="SLURM_DEFRAG_LOG_LEVEL",
            autocompletion=_complete_level,
            help="Log on stderr from this level: debug, info, warning, error (serve: "
            "overrides its log_level). Before the command: slurm-defrag --log-level debug plan",
            show_default=False,
        ),
    ] = None,
    verbose: Annotated[
        int,
        typer.Option(
            "--verbose",
            "-v",
            count=True,
            metavar="",  # a flag, repeatable: no value to show
            show_default=False,
            help="More log on stderr: -v info, -vv debug.",
        ),
    ] = 0,
) -> None:
    """Measure and repair GPU fragmentation on Slurm clusters."""
    level = _log_level(log_level, verbose)
    if level is not None:
        from slurm_defrag.service import logs

        logs.setup(level, as_json=False)
        ctx.obj = {**(ctx.obj or {}), "log_level": level}


@app.command()
def version() -> None:
    """Print the version (same as --version)."""
    typer.echo("\n".join(version_lines()))


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
