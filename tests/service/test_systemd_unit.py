"""The shipped systemd unit matches a pip/venv install and the service's protocol (#17)."""

from __future__ import annotations

import tomllib

from infra import ROOT
from slurm_defrag.errors import ExitCode

UNIT = ROOT / "contrib" / "slurm-defrag.service"


def directives() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for raw in UNIT.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith(("#", "[")) and "=" in line:
            key, _, value = line.partition("=")
            out.setdefault(key, []).append(value)
    return out


def test_paths_are_those_of_the_documented_venv() -> None:
    d = directives()
    prefix = "/opt/slurm-defrag"
    assert all(v.startswith(f"{prefix}/bin/slurm-defrag ") for v in d["ExecStart"]
               + d["ExecStartPre"])  # fmt: skip
    (doc,) = d["Documentation"]
    assert doc.startswith(f"file://{prefix}/")
    # the wheel installs that file there: a data file under <prefix>/share/doc/slurm-defrag
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    rel = doc.removeprefix(f"file://{prefix}/")
    folder, _, name = rel.rpartition("/")
    assert f"docs/{name}" in data["data-files"][folder]
    assert (ROOT / "docs" / name).is_file()


def test_notify_watchdog_and_no_restart_on_bad_config() -> None:
    d = directives()
    assert d["Type"] == ["notify"]
    assert d["NotifyAccess"] == ["main"]
    assert int(d["WatchdogSec"][0]) >= 3 * 60 + 60  # healthy() allows 3 intervals + 60 s
    assert d["RestartPreventExitStatus"] == [str(int(ExitCode.BAD_INPUT))]
