"""The conventions a Slurm admin expects of a command: --version, python -m, completion,
and exit codes that say what failed (issue #17)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infra import ROOT
from slurm_defrag import __version__
from slurm_defrag.actuator.step_errors import StepRefused
from slurm_defrag.cli import app
from slurm_defrag.errors import DefragError, ExitCode, InputError
from slurm_defrag.policy.limits import LimitError
from slurm_defrag.slurm.failures import (
    SlurmParseError,
    SlurmRejectedError,
    SlurmUnavailableError,
)
from slurm_defrag.store.database_errors import (
    DatabaseUnreachable,
    DatabaseUrlError,
    NotFound,
    SchemaNotCurrent,
    SchemaTooNew,
)

ENV = dict(os.environ)


@pytest.mark.parametrize("flag", ["--version", "-V", "version"])
def test_version_flag(flag: str) -> None:
    result = CliRunner().invoke(app, [flag])
    assert result.exit_code == 0
    assert result.output.splitlines()[0] == f"slurm-defrag {__version__}"


def test_python_dash_m_runs_the_cli() -> None:
    out = subprocess.run([sys.executable, "-m", "slurm_defrag", "--version"],
                         capture_output=True, text=True, timeout=60, env=ENV)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == f"slurm-defrag {__version__}"


@pytest.mark.parametrize("sinfo", ["slurm 24.11.5", None], ids=["sinfo", "no-sinfo"])
def test_version_names_ortools_and_slurm(sinfo: str | None, tmp_path: Path) -> None:
    """Issue #45: a bug report needs the solver's and Slurm's versions too; a host
    without Slurm still gets an answer."""
    from importlib.metadata import version

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if sinfo is not None:
        fake = bin_dir / "sinfo"
        fake.write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && echo '{sinfo}'\n")
        fake.chmod(0o755)
    out = subprocess.run([sys.executable, "-m", "slurm_defrag", "--version"],
                         capture_output=True, text=True, timeout=60,
                         env={**ENV, "PATH": str(bin_dir)})  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        f"slurm-defrag {__version__}",
        f"OR-Tools {version('ortools')}",
        "Slurm 24.11.5 (sinfo --version)" if sinfo else "Slurm: no sinfo on PATH",
    ]


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


# -- log level (issue #45) -------------------------------------------------------------


def _serve_once_without_slurm(
    tmp_path: Path, *root_options: str
) -> subprocess.CompletedProcess[str]:
    """``slurm-defrag [ROOT_OPTIONS] serve --once`` with the config's log_level ERROR, on a
    host without scontrol: the cycle's warning shows only if the option took effect."""
    from slurm_defrag.store import migrate
    from slurm_defrag.store.engine import make_engine

    url = f"sqlite:///{tmp_path / 'defrag.db'}"
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    cfg = tmp_path / "service.toml"
    cfg.write_text(f'db_url = "{url}"\nhttp_port = 0\nkill_switch_file = "{tmp_path / "STOP"}"\n'
                   'log_level = "ERROR"\n', encoding="utf-8")  # fmt: skip
    (tmp_path / "bin").mkdir()
    env = {k: v for k, v in ENV.items() if not k.startswith("SLURM_DEFRAG_")}
    return subprocess.run(
        [sys.executable, "-m", "slurm_defrag", *root_options, "serve", "--once", "--config",
         str(cfg)], capture_output=True, text=True, timeout=120,
        env={**env, "PATH": str(tmp_path / "bin")},
    )  # fmt: skip


@pytest.mark.parametrize("options", [(), ("--log-level", "info"), ("-v",), ("-vv",)])
def test_log_level_and_verbose_override_the_config(
    options: tuple[str, ...], tmp_path: Path
) -> None:
    done = _serve_once_without_slurm(tmp_path, *options)
    assert done.returncode == ExitCode.SLURM_UNAVAILABLE, done.stderr
    shown = "WARNING slurm_defrag.service.loop: cycle: Slurm unavailable" in done.stderr
    assert shown == bool(options), done.stderr


def test_a_bad_log_level_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from cli_run import assert_one_line_error

    words = ("--log-level", "'loud'", "debug, info, warning, error")
    assert_one_line_error(capsys, "--log-level", "loud", "version", words=words)


def test_main_commands_show_examples() -> None:
    for name in ("frag", "plan", "serve", "simulate"):
        out = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "200"}).output
        assert "Examples:" in out, name
        assert f"slurm-defrag {name} " in out or name == "serve", name
        assert "slurm-defrag serve -c" in out or name != "serve"
