"""This release's slurm-plugins/ is found from a checkout or an installed wheel (CI installs
the wheel, not editable), never from the working directory."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from slurm_defrag import hooks_location
from slurm_defrag.hooks_location import SHARE, plugins_dir


def _hooks(at: Path) -> Path:
    at.mkdir(parents=True)
    (at / "job_submit.lua").write_text("-- x\n", encoding="utf-8")
    return at


@pytest.fixture
def nowhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No checkout around the module, an empty prefix and user base, an empty working
    directory."""
    monkeypatch.setattr(hooks_location, "__file__", str(tmp_path / "lib" / "x" / "y" / "loc.py"))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "prefix"))
    monkeypatch.setattr(hooks_location.site, "getuserbase", lambda: str(tmp_path / "user"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_checkout_is_used_in_a_source_tree() -> None:
    found = plugins_dir()
    assert found is not None
    assert (found / "job_submit.lua").is_file()


def test_an_installed_wheel_finds_its_share_directory(nowhere: Path) -> None:
    want = _hooks(nowhere / "prefix" / SHARE)
    assert plugins_dir() == want


def test_a_user_install_finds_its_share_directory(nowhere: Path) -> None:
    want = _hooks(nowhere / "user" / SHARE)
    assert plugins_dir() == want


def test_the_working_directory_is_never_trusted(nowhere: Path) -> None:
    _hooks(nowhere / "slurm-plugins")  # e.g. a user's copy where doctor happens to run
    assert plugins_dir() is None


def test_none_when_nothing_holds_the_hooks(nowhere: Path) -> None:
    assert plugins_dir() is None


def test_an_explicit_directory_is_the_only_one_looked_in(tmp_path: Path) -> None:
    assert plugins_dir(tmp_path / "empty") is None
    assert plugins_dir(_hooks(tmp_path / "mine")) == tmp_path / "mine"


def test_the_wheel_ships_the_hooks_where_they_are_looked_for() -> None:
    import tomllib

    from infra import ROOT

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    shipped = data["data-files"][str(SHARE)]
    assert "slurm-plugins/job_submit.lua" in shipped
    assert "slurm-plugins/epilog-slurmctld" in shipped
