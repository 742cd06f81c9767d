"""Write the slurm-defrag(1) man page from the commands' own help, to stdout.

    PYTHONPATH=src .venv/bin/python scripts/manpage.py > slurm-defrag.1
    man -l slurm-defrag.1

Every command, its help (examples included) and every option with its help, as
``slurm-defrag COMMAND --help`` shows them; nothing is written by hand, so the page cannot
drift from the code (tests/project/test_manpage.py renders it).
"""

from __future__ import annotations

import inspect
import sys
from datetime import UTC, datetime
from typing import Any

import typer.main

from slurm_defrag import __version__
from slurm_defrag.cli import COMMANDS, app, load
from slurm_defrag.errors import ExitCode


def roff(text: str) -> str:
    """``text`` safe in a roff line: backslashes, hyphens, a leading dot or quote."""
    out = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join("\\&" + line if line[:1] in (".", "'") else line for line in out.split("\n"))


def paragraphs(help_text: str | None) -> list[str]:
    return [p for p in inspect.cleandoc(help_text or "").split("\n\n") if p.strip()]


def options(command: Any, ctx: Any) -> list[str]:
    lines = []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:
            continue
        names, help_text = record
        lines += [".TP", f"\\fB{roff(names)}\\fR", roff(" ".join(help_text.split()))]
    return lines


def section(name: str, command: Any, parent: Any) -> list[str]:
    ctx = command.make_context(name.split()[-1], [], parent=parent, resilient_parsing=True)
    out = [f'.SS "slurm\\-defrag {roff(name)}"']
    for i, para in enumerate(paragraphs(command.help)):
        if i and "\n" in para.strip():  # examples and other line-kept blocks
            out += [".nf", roff(para), ".fi"]
        else:
            out += [".PP" if i else "", roff(" ".join(para.split()))]
    out += options(command, ctx)
    for sub_name, sub in sorted(getattr(command, "commands", {}).items()):
        out += section(f"{name} {sub_name}", sub, ctx)
    return [line for line in out if line != ""]


def page() -> str:
    root = typer.main.get_command(app)
    ctx = root.make_context("slurm-defrag", [], resilient_parsing=True)
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    out = [
        f'.TH SLURM\\-DEFRAG 1 "{date}" "slurm\\-defrag {roff(__version__)}" "User Commands"',
        ".SH NAME",
        "slurm\\-defrag \\- measure and repair GPU fragmentation on Slurm clusters",
        ".SH SYNOPSIS",
        ".B slurm\\-defrag",
        "[\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]...",
        ".SH DESCRIPTION",
        roff(" ".join(paragraphs(root.help)[0].split())),
        "Every failure the command can explain is one line on stderr and an exit status "
        "that names its kind (below).",
        ".SH OPTIONS",
        *options(root, ctx),
        ".SH COMMANDS",
    ]
    for name in [*COMMANDS, "version"]:
        command = load(name) if name in COMMANDS else root.get_command(ctx, name)
        out += section(name, command, ctx)
    out += [".SH EXIT STATUS"]
    for code in ExitCode:
        out += [".TP", f"\\fB{code.value}\\fR", code.name]
    out += [
        ".SH SEE ALSO",
        "docs/cli.md, docs/service.md, docs/quickstart.md in the slurm\\-defrag sources;",
        ".BR scontrol (1),",
        ".BR sinfo (1)",
    ]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(page())
