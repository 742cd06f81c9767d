"""Backends wired to recorded Slurm output (tests/fixtures/slurm-22.05, -24.11, -26.05).

Imported by the tests of this folder as ``from slurm_recordings import ...`` (a test module
cannot import ``conftest``: several folders have one), and through the ``recordings``
fixture of conftest.py.

The recordings are one cluster state seen by Slurm 22.05, 24.11 (see the README in
shared/slurm-recordings) and 26.05 (tests/fixtures/slurm-26.05/README.md, made by
scripts/record_slurm.sh). Each backend gets its transport replaced at the boundary, never
its parsing: the cli backend a runner that replays ``<command>.json|.txt`` files, the rest
backend an httpx.MockTransport serving ``slurmrestd_GET_...json``, the pyslurm backend
stand-in objects built from the ``pyslurm-24.11_*.json`` dumps.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx

from slurm_defrag.slurm.cli_backend import CliSlurm
from slurm_defrag.slurm.connection import SlurmSettings
from slurm_defrag.slurm.pyslurm_adapter import PyslurmSlurm
from slurm_defrag.slurm.rest import RestSlurm

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
VERSIONS = ("22.05", "24.11", "26.05")
API = {"22.05": "v0.0.38", "24.11": "v0.0.42", "26.05": "v0.0.45"}
# A moment just after each recording was taken (both ran on a UTC clock).
TAKEN_AT = {
    "22.05": datetime(2026, 11, 29, 15, 13, 33, tzinfo=UTC),
    "24.11": datetime(2026, 11, 29, 15, 14, 13, tzinfo=UTC),
    "26.05": datetime(2026, 12, 3, 7, 36, 40, tzinfo=UTC),
    # the compose s2511 cluster (tests/fixtures/slurm-25.11/README.md): pyslurm dumps only
    "25.11": datetime(2026, 12, 3, 8, 21, 0, tzinfo=UTC),
}


def fixture_dir(version: str) -> Path:
    return FIXTURES / f"slurm-{version}"


def settings_for(version: str, **extra: Any) -> SlurmSettings:
    return SlurmSettings(gres_conf=fixture_dir(version) / "config" / "gres.conf", **extra)


class ReplayRunner:
    """Answers Slurm commands from recorded files; unknown commands fail the test.

    ``overrides`` maps a command line (``"squeue --json"``) to replacement stdout, or to a
    (returncode, stdout, stderr) tuple, to simulate malformed output or failures.
    """

    def __init__(self, version: str, overrides: dict[str, Any] | None = None) -> None:
        self.dir = fixture_dir(version)
        self.version = version
        self.overrides = overrides or {}
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        argv = list(argv)
        self.calls.append(argv)
        line = " ".join(argv)
        if line in self.overrides:
            v = self.overrides[line]
            if isinstance(v, tuple):
                return subprocess.CompletedProcess(argv, v[0], v[1], v[2])
            return subprocess.CompletedProcess(argv, 0, v, "")
        if argv == ["scontrol", "--version"]:
            micro = {"22.05": 8, "24.11": 5, "26.05": 5}[self.version]
            return subprocess.CompletedProcess(argv, 0, f"slurm-wlm {self.version}.{micro}\n", "")
        if (
            argv == ["scontrol", "show", "config"]
            and not (self.dir / "scontrol_show_config.txt").exists()
        ):
            # not in the shared recordings: the one line read, from the recorded slurm.conf
            plugin = _conf_value(self.dir / "config" / "slurm.conf", "TopologyPlugin")
            return subprocess.CompletedProcess(argv, 0, f"TopologyPlugin          = {plugin}\n", "")
        stem = "_".join(argv)
        for suffix, rc in ((".json", 0), (".txt", 0), (".ERROR.txt", 1)):
            path = self.dir / (stem + suffix)
            if path.exists():
                text = path.read_text(encoding="utf-8")
                return subprocess.CompletedProcess(argv, rc, "" if rc else text, text if rc else "")
        raise AssertionError(f"no recording for {line!r}")


def _conf_value(path: Path, key: str) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        k, sep, v = line.partition("=")
        if sep and k.strip() == key:
            return v.strip()
    return "(null)"


def recorded_text(version: str, name: str) -> str:
    return (fixture_dir(version) / name).read_text(encoding="utf-8")


def rest_transport(
    version: str, overrides: dict[str, httpx.Response] | None = None
) -> httpx.MockTransport:
    """slurmrestd serving the recorded API version only (others answer 404)."""
    api = API[version]
    overrides = overrides or {}

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path in overrides:
            return overrides[path]
        parts = path.strip("/").split("/")
        if len(parts) < 3 or parts[0] != "slurm" or parts[1] != api:
            return httpx.Response(404, text="Unable to find request path")
        endpoint = "_".join(parts[2:])
        if endpoint == "ping":
            return httpx.Response(200, json={"meta": {}, "errors": [], "pings": [{"pinged": "UP"}]})
        file = fixture_dir(version) / f"slurmrestd_GET_slurm_{api}_{endpoint}.json"
        if not file.exists():
            return httpx.Response(404, text="Unable to find request path")
        return httpx.Response(200, content=file.read_bytes())

    return httpx.MockTransport(handler)


class StandIn:
    """A pyslurm object as far as the adapter uses it: ``to_dict()`` and, for jobs, the
    per-node resource layout."""

    def __init__(self, data: dict[str, Any], layout: dict[str, Any] | None = None) -> None:
        self._data = data
        self._layout = layout or {}
        for k, v in data.items():
            setattr(self, k, v)

    def to_dict(self, recursive: bool = False) -> dict[str, Any]:
        return dict(self._data)

    def get_resource_layout_per_node(self) -> dict[str, Any]:
        return self._layout


def pyslurm_module(version: str = "24.11") -> SimpleNamespace:
    """A stand-in ``pyslurm`` module whose ``X.load()`` return the recorded dumps."""
    d = fixture_dir(version)

    def load(name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((d / f"pyslurm-{version}_{name}.json").read_text())
        return data

    layouts = load("resource_layout_per_node")

    def collection(name: str, with_layout: bool = False) -> Callable[[], list[StandIn]]:
        return lambda: [
            StandIn(v, layouts.get(k) if with_layout else None) for k, v in load(name).items()
        ]

    return SimpleNamespace(
        Nodes=SimpleNamespace(load=collection("nodes")),
        Jobs=SimpleNamespace(load=collection("jobs", with_layout=True)),
        Partitions=SimpleNamespace(load=collection("partitions")),
        Reservations=SimpleNamespace(load=collection("reservations")),
        RPCError=RuntimeError,
    )


def cli_backend(version: str, runner: ReplayRunner | None = None, **settings: Any) -> CliSlurm:
    return CliSlurm(
        settings_for(version, **settings),
        runner=runner or ReplayRunner(version),
        clock=lambda: TAKEN_AT[version],
    )


def rest_backend(
    version: str, transport: httpx.MockTransport | None = None, **settings: Any
) -> RestSlurm:
    transport = transport or rest_transport(version)
    client = httpx.Client(base_url="http://slurmrestd", transport=transport)
    return RestSlurm(
        settings_for(version, backend="rest", **settings),
        client=client,
        clock=lambda: TAKEN_AT[version],
    )


def pyslurm_backend(version: str = "24.11") -> PyslurmSlurm:
    return PyslurmSlurm(
        settings_for(version, backend="pyslurm"),
        module=pyslurm_module(version),
        clock=lambda: TAKEN_AT[version],
    )
