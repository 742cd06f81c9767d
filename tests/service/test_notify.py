"""systemd readiness and watchdog (sd_notify(3)) over a real datagram socket (issue #17)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_defrag.service import notify


@pytest.fixture
def systemd(tmp_path: Path) -> Iterator[socket.socket]:
    """A datagram socket where systemd's $NOTIFY_SOCKET would be."""
    path = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.settimeout(5)
        yield sock


def received(sock: socket.socket) -> str:
    return sock.recv(4096).decode()


def test_messages_reach_the_notify_socket(systemd: socket.socket) -> None:
    env = {"NOTIFY_SOCKET": systemd.getsockname()}
    assert notify.notify("READY=1\nSTATUS=serving", env)
    assert received(systemd) == "READY=1\nSTATUS=serving"


def test_abstract_namespace_socket() -> None:
    name = f"slurm-defrag-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(5)
        assert notify.notify("WATCHDOG=1", {"NOTIFY_SOCKET": "@" + name})
        assert received(sock) == "WATCHDOG=1"


@pytest.mark.parametrize("value", ["", "relative/path", "/nonexistent/socket"])
def test_outside_systemd_nothing_happens(value: str) -> None:
    assert not notify.notify("READY=1", {"NOTIFY_SOCKET": value})


@pytest.mark.parametrize(
    ("env", "interval"),
    [
        ({"WATCHDOG_USEC": "300000000"}, 150.0),
        ({}, None),
        ({"WATCHDOG_USEC": "0"}, None),
        ({"WATCHDOG_USEC": "²"}, None),
        ({"WATCHDOG_USEC": "10", "WATCHDOG_PID": "1"}, None),
        ({"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": str(os.getpid())}, 1.0),
    ],
)
def test_watchdog_interval(env: dict[str, str], interval: float | None) -> None:
    assert notify.watchdog_interval_s(env) == interval


def test_service_says_ready_feeds_the_watchdog_and_says_stopping(
    systemd: socket.socket,
    monkeypatch: pytest.MonkeyPatch,
    make_cycle,
    tmp_path: Path,
) -> None:  # type: ignore[no-untyped-def]
    from slurm_defrag.service.runner import Service
    from slurm_defrag.service.settings import ServiceSettings

    monkeypatch.setenv("NOTIFY_SOCKET", systemd.getsockname())
    monkeypatch.setenv("WATCHDOG_USEC", "400000")  # fed every 0.2 s
    settings = ServiceSettings(
        http_port=0, interval_s=3600, mode="dry-run", kill_switch_file=tmp_path / "STOP"
    )
    cycle = make_cycle("dry-run")
    service = Service(settings, cycle, cycle.lease)
    service.start()
    try:
        seen: list[str] = []
        while not (
            {"READY=1", "WATCHDOG=1"} <= {m.split("\n")[0] for m in seen}
            and any(m.startswith("STATUS=last cycle") for m in seen)
        ):
            seen.append(received(systemd))
    finally:
        service.stop()
    assert seen[0].startswith("READY=1\nSTATUS=serving, mode dry-run")
    while (msg := received(systemd)) != "STOPPING=1":
        assert msg in ("WATCHDOG=1",) or msg.startswith("STATUS=")
