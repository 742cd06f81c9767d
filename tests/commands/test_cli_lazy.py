"""The CLI lists its commands without importing them (issue #42), and lists them as their
own help says: the copied help lines are the commands' own first paragraphs."""

from __future__ import annotations

import inspect
import json
import pkgutil
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from slurm_defrag.cli import COMMANDS, app, load


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_listed_help_line_is_the_commands_own(name: str) -> None:
    real = load(name)
    assert real.name == name
    assert real.help is not None
    assert inspect.cleandoc(real.help).split("\n\n")[0].replace("\n", " ") == COMMANDS[name].help


def test_every_command_module_is_listed() -> None:
    """A command module added to commands/ but not to COMMANDS would never run."""
    from slurm_defrag import commands

    helpers = {
        "common",
        "doctor_checks",
        "history_plot",
        "render_profile",
        "report_plot",
        "serve_profile",
        "simulate_db",
        "top_sources",
    }
    modules = {m.name for m in pkgutil.iter_modules(commands.__path__)} - helpers
    assert modules == {spec.module for spec in COMMANDS.values()}


def test_help_lists_every_command_in_order() -> None:
    out = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    listed = [line.split()[1] for line in out.splitlines() if line.startswith("│ ")]
    names = [n for n in listed if n in COMMANDS or n == "version"]
    lazy = list(COMMANDS)
    # version (defined in cli.py itself) is listed just before db, as it always was
    assert names == [*lazy[: lazy.index("db")], "version", *lazy[lazy.index("db") :]]


# Which of the package's command modules a fresh interpreter loads for some arguments.
PROBE = """
import json, sys
from slurm_defrag.cli import main
sys.argv = ["slurm-defrag", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith("slurm_defrag.commands."))),
      file=sys.stderr)
"""


def _command_modules(*args: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    return {m.rsplit(".", 1)[1] for m in json.loads(out.stderr.strip().splitlines()[-1])}


def test_help_imports_no_command_module() -> None:
    assert _command_modules("--help") == set()


def test_a_command_imports_its_own_module_only() -> None:
    # history's --db option comes from the db command's module (shared option)
    assert _command_modules("history", "--help") == {"history", "common", "db"}
    assert _command_modules("plugins", "--help") == {"plugins"}
