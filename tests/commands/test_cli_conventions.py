"""The conventions a Slurm admin expects of a command: --version, python -m, completion,
and exit codes that say what failed (issue #17)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from infra import ROOT
from slurm_defrag import __version__
from slurm_defrag.actuator.errors import StepRefused
from slurm_defrag.cli import app
from slurm_defrag.errors import DefragError, ExitCode, InputError
from slurm_defrag.policy.limits import LimitError
from slurm_defrag.slurm.errors import (
    SlurmParseError,
    SlurmRejectedError,
    SlurmUnavailableError,
)
from slurm_defrag.store.errors import (
    DatabaseUnreachable,
    DatabaseUrlError,
    NotFound,
    SchemaNotCurrent,
    SchemaTooNew,
)

ENV = dict(os.environ)


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_flag(flag: str) -> None:
    result = CliRunner().invoke(app, [flag])
    assert result.exit_code == 0
    assert result.output == f"slurm-defrag {__version__}\n"


def test_python_dash_m_runs_the_cli() -> None:
    out = subprocess.run([sys.executable, "-m", "slurm_defrag", "--version"],
                         capture_output=True, text=True, timeout=60, env=ENV)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"slurm-defrag {__version__}"


def test_bash_completion_completes_commands() -> None:
    # click's completion protocol, as the installed bash script calls it
    env = {**ENV, "_SLURM_DEFRAG_COMPLETE": "complete_bash", "COMP_WORDS": "slurm-defrag fr",
           "COMP_CWORD": "1"}  # fmt: skip
    out = subprocess.run([sys.executable, "-m", "slurm_defrag"], capture_output=True,
                         text=True, timeout=60, env=env)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "frag" in out.stdout.split()


def test_show_completion_prints_a_script() -> None:
    # Typer detects the shell from the parent processes unless told not to (then the
    # option takes the shell's name): a test run with no shell above it, a detached CI job,
    # would otherwise get "Shell  not supported".
    env = {**ENV, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    out = subprocess.run([sys.executable, "-m", "slurm_defrag", "--show-completion", "bash"],
                         capture_output=True, text=True, timeout=60, env=env)  # fmt: skip
    assert out.returncode == 0, out.stderr + out.stdout
    assert "_SLURM_DEFRAG_COMPLETE" in out.stdout.upper()


def test_usage_error_is_exit_2() -> None:
    assert CliRunner().invoke(app, ["frag", "--no-such-option"]).exit_code == ExitCode.USAGE


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (DefragError, ExitCode.FAILED),
        (InputError, ExitCode.BAD_INPUT),
        (DatabaseUrlError, ExitCode.BAD_INPUT),
        (SlurmUnavailableError, ExitCode.SLURM_UNAVAILABLE),
        (SlurmRejectedError, ExitCode.SLURM_REJECTED),
        (SlurmParseError, ExitCode.SLURM_UNREADABLE),
        (DatabaseUnreachable, ExitCode.DB_UNREACHABLE),
        (SchemaNotCurrent, ExitCode.DB_SCHEMA),
        (SchemaTooNew, ExitCode.DB_SCHEMA),
        (NotFound, ExitCode.NOT_FOUND),
        (StepRefused, ExitCode.REFUSED),
        (LimitError, ExitCode.REFUSED),
    ],
)
def test_each_failure_kind_has_its_code(error: type[DefragError], code: ExitCode) -> None:
    assert error.exit_code == code


def test_docs_table_matches_the_codes() -> None:
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| (\d+) \| `(\w+)` \|", text, re.MULTILINE))
    assert {int(k): v for k, v in rows.items()} == {c.value: c.name for c in ExitCode}


def test_a_real_failure_exits_with_its_code(tmp_path) -> None:  # type: ignore[no-untyped-def]
    broken = tmp_path / "broken.json"
    broken.write_text('{"nodes": [')
    out = subprocess.run([sys.executable, "-m", "slurm_defrag", "frag", "--snapshot",
                          str(broken)], capture_output=True, text=True, timeout=60,
                         env=ENV)  # fmt: skip
    assert out.returncode == ExitCode.BAD_INPUT
    assert out.stderr.count("\n") == 1


def test_error_line_shows_controls_escaped(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A message quoting hostile text (here a file name) cannot drive the terminal or
    break the one-line contract."""
    hostile = tmp_path / "x\x1b]52;c;cHduZWQ=\x07\nJobId=1.json"
    out = subprocess.run([sys.executable, "-m", "slurm_defrag", "frag", "--snapshot",
                          str(hostile)], capture_output=True, text=True, timeout=60,
                         env=ENV)  # fmt: skip
    assert out.returncode == ExitCode.BAD_INPUT
    assert "\x1b" not in out.stderr
    assert "\x07" not in out.stderr
    assert out.stderr.count("\n") == 1


# -- completion and help (issue #45) ---------------------------------------------------


@pytest.mark.parametrize(
    ("shell", "marker"),
    [("bash", "complete -o default -F"), ("zsh", "#compdef slurm-defrag"),
     ("fish", "complete --command slurm-defrag")],
)  # fmt: skip
def test_show_completion_prints_the_named_shells_script(shell: str, marker: str) -> None:
    """``--show-completion zsh`` printed bash's script when run from bash: typer took the
    shell from the parent process and ignored the one named."""
    env = {k: v for k, v in ENV.items() if k != "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION"}
    out = subprocess.run([sys.executable, "-m", "slurm_defrag", "--show-completion", shell],
                         capture_output=True, text=True, timeout=60, env=env)  # fmt: skip
    assert out.returncode == 0, out.stderr + out.stdout
    assert marker in out.stdout


def _complete(*words: str) -> list[str]:
    """What bash completion offers after ``slurm-defrag WORDS`` (the last may be partial)."""
    line = " ".join(("slurm-defrag", *words))
    env = {**ENV, "_SLURM_DEFRAG_COMPLETE": "complete_bash", "COMP_WORDS": line,
           "COMP_CWORD": str(len(words))}  # fmt: skip
    out = subprocess.run([sys.executable, "-m", "slurm_defrag"], capture_output=True,
                         text=True, timeout=60, env=env)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_serve_mode_values_complete() -> None:
    assert _complete("serve", "--mode", "") == ["off", "dry-run", "enforce"]
    assert _complete("serve", "--mode", "en") == ["enforce"]


@pytest.mark.parametrize("args", [[], ["serve"], ["frag"], ["db", "upgrade"], ["doctor"]])
def test_help_has_no_bool_placeholder_and_dash_h_is_help(args: list[str]) -> None:
    """Every flag showed ``<bool>`` as if it took a value; ``-h`` was an unknown option."""
    env = {"COLUMNS": "200"}
    full = CliRunner().invoke(app, [*args, "--help"], env=env)
    short = CliRunner().invoke(app, [*args, "-h"], env=env)
    assert full.exit_code == 0, full.output
    assert "<bool>" not in full.output
    assert short.exit_code == 0, short.output
    assert short.output == full.output
    if args:  # the completion options are the root's, not every command's
        assert "--install-completion" not in full.output
