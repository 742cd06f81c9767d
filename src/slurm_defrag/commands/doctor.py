"""``slurm-defrag doctor``: is this installation ready to act? One line per check.

The checks are in :mod:`slurm_defrag.commands.doctor_checks`; this module builds what
they read (the service's settings, the configured backend, the controller reached
through the cli backend's runner) and prints their lines. Exit 0 when no check fails
(``enforce`` is safe to turn on), 1 when one does; a malformed config or option is exit 3
(``BAD_INPUT``) before any check runs, a wrong command line exit 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from slurm_defrag.commands.common import JsonOpt, command_words

if TYPE_CHECKING:
    from slurm_defrag.commands.doctor_checks import Result
    from slurm_defrag.domain.cluster import ClusterSnapshot

_MARK = {
    "ok": ("ok  ", "bold green"),
    "warn": ("warn", "bold yellow"),
    "fail": ("FAIL", "bold red"),
    "skip": ("skip", "dim"),
}


class _Unopened:
    """A backend that could not be built: its read fails with the reason (one line)."""

    def __init__(self, name: str, error: Exception) -> None:
        self.name = name
        self._error = error

    def snapshot(self) -> ClusterSnapshot:
        raise self._error


def doctor(
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            help="The service's TOML config (default: $SLURM_DEFRAG_CONFIG, else none).",
            readable=False,
        ),
    ] = None,
    db: Annotated[
        str | None,
        typer.Option("--db", help="Database URL (default: the config's db_url)."),
    ] = None,
    backend: Annotated[
        Literal["cli", "rest", "pyslurm"] | None,
        typer.Option("--backend", "-b", help="cli | rest | pyslurm (default: the config's)."),
    ] = None,
    command_prefix: Annotated[
        str | None,
        typer.Option(
            "--command-prefix",
            help="Words put before each Slurm command, e.g. 'docker exec CONTAINER' "
            "(default: the config's).",
        ),
    ] = None,
    plugins_dir: Annotated[
        Path | None,
        typer.Option(
            "--plugins-dir",
            help="This release's slurm-plugins/ to compare the installed hooks with "
            "(default: the installed release's, or the checkout's).",
            readable=False,
        ),
    ] = None,
    job_submit: Annotated[
        str | None,
        typer.Option(
            "--job-submit",
            help="Path of job_submit.lua on the controller (default: next to SLURM_CONF).",
        ),
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", min=0.1, help="Seconds per Slurm call.")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Check Slurm, the backend, rights, topology, hooks, database, clock and switches."""
    from slurm_defrag.commands.doctor_checks import Env, exit_code, run_checks
    from slurm_defrag.errors import DefragError
    from slurm_defrag.service.settings import load
    from slurm_defrag.slurm.backends import open_backend
    from slurm_defrag.slurm.cli_backend import CliSlurm

    settings = load(config, db_url=db)
    updates: dict[str, object] = {}
    if backend is not None:
        updates["backend"] = backend
    if command_prefix is not None:
        updates["command_prefix"] = command_words(command_prefix)
    if timeout is not None:
        updates["command_timeout_s"] = updates["rest_timeout_s"] = timeout
    if updates:
        slurm = settings.slurm.model_validate({**settings.slurm.model_dump(), **updates})
        settings = settings.model_copy(update={"slurm": slurm})
    try:
        reader = open_backend(settings.slurm)
    except (DefragError, ImportError) as exc:
        reader = _Unopened(settings.slurm.backend, exc)  # type: ignore[assignment]
    env = Env(
        settings=settings,
        backend=reader,
        controller=CliSlurm(settings.slurm),
        plugins_dir=plugins_dir,
        job_submit=job_submit,
    )
    results = run_checks(env)
    code = exit_code(results)
    if json_out:
        doc = {
            "ok": code == 0,
            "exit_code": code,
            "checks": [
                {"name": r.name, "status": r.status, "summary": r.summary, "fix": r.fix or None}
                for r in results
            ],
        }
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        _print(results, code)
    raise typer.Exit(code)


def _print(results: list[Result], code: int) -> None:
    from rich.text import Text

    from slurm_defrag.report.console import output_console
    from slurm_defrag.report.safe_text import clean

    console = output_console()
    width = max(len(r.name) for r in results)
    for r in results:
        mark, style = _MARK[r.status]
        line = Text.assemble(
            (mark, style), " ", (r.name.ljust(width), "bold"), "  ", clean(r.summary)
        )
        if r.fix and r.status in ("warn", "fail"):
            line.append_text(Text.assemble(("  fix: ", "cyan"), clean(r.fix)))
        console.print(line, soft_wrap=True)
    fails = sum(r.status == "fail" for r in results)
    warns = sum(r.status == "warn" for r in results)
    skips = sum(r.status == "skip" for r in results)
    verdict = (
        Text("enforce is safe to turn on", style="bold green")
        if code == 0
        else Text(f"not ready for enforce: {fails} check(s) failed", style="bold red")
    )
    if skips:
        verdict.append(f", {skips} not checked")
    if warns:
        verdict.append(f" ({warns} warning(s))")
    console.print(verdict)
