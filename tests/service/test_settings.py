"""Service settings: TOML file, environment on top, every error named at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_defrag.errors import InputError
from slurm_defrag.service import settings


def test_defaults_are_safe(monkeypatch: pytest.MonkeyPatch) -> None:
    s = settings.load()
    assert s.mode == "dry-run"
    assert s.http_host == "127.0.0.1"
    assert s.http_port == 8787
    assert s.slurm.backend == "cli"


def test_toml_then_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "service.toml"
    cfg.write_text(
        'mode = "enforce"\ninterval_s = 20\npolicy = "/etc/slurm-defrag/policy.toml"\n'
        'db_url = "sqlite:////tmp/x.db"\n'
        '[slurm]\nbackend = "cli"\n'
        'command_prefix = ["docker", "exec", "slurmdefrag-bookworm-slurmctld"]\n'
        "[solver]\nmax_time_in_seconds = 3\n"
    )
    monkeypatch.setenv("SLURM_DEFRAG_INTERVAL_S", "5")
    s = settings.load(cfg)
    assert s.mode == "enforce"
    assert s.interval_s == 5  # the environment wins over the file
    assert s.slurm.command_prefix == ["docker", "exec", "slurmdefrag-bookworm-slurmctld"]
    assert s.solver is not None
    assert s.solver.max_time_in_seconds == 3
    assert s.policy == Path("/etc/slurm-defrag/policy.toml")
    # Command-line options win over both.
    assert settings.load(cfg, mode="off").mode == "off"


def test_nested_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_DEFRAG_SLURM__BACKEND", "rest")
    assert settings.load().slurm.backend == "rest"


def test_the_environment_wins_over_the_files_slurm_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect: with a ``[slurm]`` table in the file (the compose service.toml has one),
    ``SLURM_DEFRAG_SLURM_BACKEND`` was ignored; the other keys of the table stay."""
    cfg = tmp_path / "service.toml"
    cfg.write_text('[slurm]\nbackend = "cli"\ncommand_timeout_s = 7\n')
    assert settings.load(cfg).slurm.backend == "cli"
    monkeypatch.setenv("SLURM_DEFRAG_SLURM_BACKEND", "pyslurm")
    loaded = settings.load(cfg).slurm
    assert (loaded.backend, loaded.command_timeout_s) == ("pyslurm", 7)
    monkeypatch.setenv("SLURM_DEFRAG_SLURM__BACKEND", "rest")  # the nested form is stronger
    assert settings.load(cfg).slurm.backend == "rest"


def test_every_bad_key_is_reported(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text('mode = "yes"\ninterval_s = -1\nintervall = 3\n')
    with pytest.raises(InputError) as err:
        settings.load(cfg)
    text = str(err.value)
    assert "mode:" in text
    assert "interval_s:" in text
    assert "intervall:" in text


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nope.toml \(from --config\): no such file"):
        settings.load(tmp_path / "nope.toml")


def test_the_example_config_loads() -> None:
    from infra import ROOT

    s = settings.load(ROOT / "contrib" / "service.toml")
    assert s.mode == "dry-run"
    assert s.packing is False


def test_serve_is_a_command_and_checks_its_mode() -> None:
    from typer.testing import CliRunner

    from slurm_defrag.cli import app

    runner = CliRunner()
    assert "--config" in runner.invoke(app, ["serve", "--help"]).output
    result = runner.invoke(app, ["serve", "--mode", "yes"])
    assert result.exit_code != 0
    assert isinstance(result.exception, InputError)


def test_bad_toml_is_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "dup.toml"
    cfg.write_text('mode = "off"\nmode = "enforce"\n')
    with pytest.raises(InputError, match="not valid TOML"):
        settings.load(cfg)


# -- hostile input (issue 15): configuration fails closed ------------------------------


def test_misspelt_config_env_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect: a misspelt SLURM_DEFRAG_CONFIG ran on built-in defaults (no site
    protections), exit 0. Now one line naming the path and the variable, exit != 0."""
    from cli_run import assert_one_line_error

    missing = tmp_path / "servce.toml"
    monkeypatch.setenv(settings.CONFIG_ENV, str(missing))
    monkeypatch.setenv("SLURM_DEFRAG_DB_URL", f"sqlite:///{tmp_path}/none/x.db")
    with pytest.raises(InputError, match=r"servce.toml \(from SLURM_DEFRAG_CONFIG\): no such"):
        settings.load()
    assert_one_line_error(capsys, "serve", "--once", words=(str(missing), "SLURM_DEFRAG_CONFIG"))
    monkeypatch.setenv(settings.CONFIG_ENV, str(tmp_path))  # a directory is no config file
    with pytest.raises(InputError, match="is a directory"):
        settings.load()


def test_config_option_beats_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "service.toml"
    cfg.write_text('mode = "off"\n')
    monkeypatch.setenv(settings.CONFIG_ENV, str(tmp_path / "other.toml"))
    assert settings.load(cfg).mode == "off"
    monkeypatch.setenv(settings.CONFIG_ENV, str(cfg))
    assert settings.load().mode == "off"
    monkeypatch.setenv(settings.CONFIG_ENV, "")  # set but empty: as unset
    assert settings.load().mode == "dry-run"


def test_unknown_keys_in_every_table_are_errors(tmp_path: Path) -> None:
    """Defect: unknown keys in [slurm] were silently ignored (extra="ignore")."""
    cfg = tmp_path / "service.toml"
    cfg.write_text(
        'modee = "enforce"\n[slurm]\nbakend = "rest"\n[solver]\nmax_tme = 3\n[nonsense]\nx = 1\n'
    )
    with pytest.raises(InputError) as err:
        settings.load(cfg)
    text = str(err.value)
    for key in ("modee", "slurm.bakend", "solver.max_tme", "nonsense"):
        assert f"{key}: unknown key" in text, text


def test_environment_still_works_and_nested_typos_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Unknown keys are refused in tables; the environment keeps working, both prefixes."""
    monkeypatch.setenv("SLURM_DEFRAG_SLURM_BACKEND", "rest")  # SlurmSettings' own prefix
    assert settings.load().slurm.backend == "rest"
    monkeypatch.delenv("SLURM_DEFRAG_SLURM_BACKEND")
    monkeypatch.setenv("SLURM_DEFRAG_SLURM__BACKEND", "pyslurm")
    assert settings.load().slurm.backend == "pyslurm"
    monkeypatch.setenv("SLURM_DEFRAG_NOT_A_SETTING", "1")  # shared prefix: not read
    monkeypatch.setenv("SLURM_DEFRAG_SLURM_NOT_A_SETTING", "1")
    assert settings.load().mode == "dry-run"
    monkeypatch.setenv("SLURM_DEFRAG_SLURM__BAKEND", "rest")  # a nested key: refused
    with pytest.raises(InputError, match=r"slurm\.bakend: unknown key"):
        settings.load()


def test_bad_json_in_the_environment_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect: a list variable that is not JSON raised pydantic_settings.SettingsError."""
    from slurm_defrag.slurm.connection import load_settings

    monkeypatch.setenv("SLURM_DEFRAG_HTTP_ALLOW", "[10.0.0.0/8")
    with pytest.raises(InputError, match="http_allow"):
        settings.load()
    monkeypatch.setenv("SLURM_DEFRAG_SLURM_COMMAND_PREFIX", "[sudo")
    with pytest.raises(InputError, match="command_prefix"):
        load_settings()


@pytest.mark.parametrize(
    "line",
    [
        'kill_switch_file = ""',
        'policy = " "',
        '[slurm]\ngres_conf = ""',
        '[slurm]\nrest_token_file = ""',
        '[slurm]\nrest_socket = ""',
    ],
)
def test_empty_paths_are_refused(tmp_path: Path, line: str) -> None:
    """Defect: kill_switch_file = "" became "." and read as "kill switch present" for ever."""
    cfg = tmp_path / "service.toml"
    cfg.write_text(line + "\n")
    with pytest.raises(InputError, match="empty path"):
        settings.load(cfg)


def test_empty_path_from_the_environment_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_DEFRAG_KILL_SWITCH_FILE", "")
    with pytest.raises(InputError, match="kill_switch_file: empty path"):
        settings.load()


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b'mode = "\xff"\n', ("not UTF-8",)),
        (b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n", ("nested too deeply",)),
        (b"mode = 1\n", ("mode:",)),
        (b"slurm = 3\n", ("slurm:",)),
        (b'[slurm]\ncommand_prefix = "sudo"\n', ("slurm.command_prefix:",)),
        (b"interval_s = inf\n", ("interval_s:",)),
        (b'http_allow = ["x"]\n', ("http_allow.0:",)),
        (b'"a\\nb" = 1\n', ("a\\nb: unknown key",)),
        (b"[solver]\nnum_workers = 100000000\n", ("solver.num_workers: ",)),
        (b"[solver]\nmax_time_in_seconds = -1\n", ("solver.max_time_in_seconds: ",)),
    ],
)
def test_hostile_config_is_one_line_through_the_cli(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    content: bytes,
    words: tuple[str, ...],
) -> None:
    """Defect: non-UTF-8 and 5,000-deep TOML (RecursionError), wrong types and
    out-of-range solver settings were tracebacks; now one line and exit != 0."""
    from cli_run import assert_one_line_error

    # Should a value pass, serve must not reach the machine's default database.
    monkeypatch.setenv("SLURM_DEFRAG_DB_URL", f"sqlite:///{tmp_path}/none/x.db")

    cfg = tmp_path / "service.toml"
    cfg.write_bytes(content)
    assert_one_line_error(capsys, "serve", "--config", str(cfg), "--once", words=(str(cfg), *words))


def test_rest_token_file_not_utf8_or_missing(tmp_path: Path) -> None:
    """Defect: a non-UTF-8 token file raised UnicodeDecodeError at the first request."""
    from slurm_defrag.slurm.connection import SlurmSettings

    token = tmp_path / "jwt"
    token.write_bytes(b"SLURM_JWT=\xff\xfe")
    with pytest.raises(InputError, match=r"jwt \(from rest_token_file\): not UTF-8"):
        SlurmSettings(rest_token_file=token).token()
    with pytest.raises(InputError, match="no such file"):
        SlurmSettings(rest_token_file=tmp_path / "nope").token()
    token.write_text("SLURM_JWT=abc\n")
    assert SlurmSettings(rest_token_file=token).token() == "abc"
