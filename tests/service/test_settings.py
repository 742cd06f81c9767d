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
        '[solver]\nmax_time_in_seconds = 3\n'
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
    with pytest.raises(InputError, match="does not exist"):
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
