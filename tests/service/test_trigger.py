"""Issue #15, ``POST /trigger``: coalesced with a minimum interval, optional shared secret.

Anyone who reaches the endpoint can trigger; before the fix every trigger moved the next
cycle to now, so a loop of ``curl`` ran cycles back to back (Slurm reads, database writes,
plans) as fast as it could send.
"""

from __future__ import annotations

import itertools
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from service_helpers import CycleFactory
from slurm_defrag.errors import InputError
from slurm_defrag.service.http import ControlServer
from slurm_defrag.service.runner import Service
from slurm_defrag.service.settings import ServiceSettings
from slurm_defrag.service.trigger import (
    SECRET_HEADER,
    Ticket,
    TriggerGate,
    read_secret,
    secret_matches,
)

SECRET = b"0123456789abcdef0123456789abcdef"


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_gate_coalesces_into_one_pending_cycle() -> None:
    clock = Clock()
    gate = TriggerGate(10, clock)
    assert gate.request() == Ticket(True, 0.0)  # nothing ran yet: now
    assert gate.request() == Ticket(False, 0.0)  # folded into the pending one
    assert gate.due_now()
    gate.cycle_started()
    assert not gate.pending
    clock.t += 2
    assert gate.request() == Ticket(True, 8.0)  # 10 s after the last start
    clock.t += 3
    for _ in range(100):
        assert gate.request() == Ticket(False, 5.0)
    assert not gate.due_now()
    clock.t += 5
    assert gate.due_now()
    gate.cycle_started()
    clock.t += 60
    assert gate.request() == Ticket(True, 0.0)  # quiet for longer than the interval


def test_any_cycle_serves_the_pending_trigger() -> None:
    clock = Clock()
    gate = TriggerGate(10, clock)
    gate.cycle_started()
    assert gate.request().scheduled
    gate.cycle_started()  # the scheduled interval cycle came first
    assert not gate.pending
    assert not gate.due_now()


def _post(base: str, **headers: str) -> tuple[int, dict[str, object], dict[str, str]]:
    req = urllib.request.Request(base + "/trigger", method="POST", data=b"{}", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read()), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), dict(e.headers)


def test_a_flood_of_triggers_runs_at_most_two_cycles(
    make_cycle: CycleFactory, tmp_path: Path
) -> None:
    """Defect (#15): POST /trigger was unthrottled. 200 triggers in a burst: one cycle at
    once (or the first scheduled one), one more min_interval later, every other trigger
    answered 429 with Retry-After."""
    cycle = make_cycle("off")
    settings = ServiceSettings(
        mode="off",
        interval_s=3600,
        http_port=0,
        kill_switch_file=tmp_path / "STOP",
        trigger_min_interval_s=0.6,
    )
    service = Service(settings, cycle, cycle.lease)
    started: list[float] = []
    inner = cycle.run

    def counting_run():  # type: ignore[no-untyped-def]
        started.append(time.monotonic())
        return inner()

    cycle.run = counting_run  # type: ignore[method-assign]
    service.start()
    http = ControlServer("127.0.0.1", 0, service.trigger, service.health)
    http.start()
    try:
        deadline = time.monotonic() + 10
        while not started and time.monotonic() < deadline:  # the first scheduled cycle
            time.sleep(0.02)
        assert len(started) == 1
        base = f"http://127.0.0.1:{http.port}"
        burst_t0 = time.monotonic()
        answers = [_post(base) for _ in range(200)]
        burst_s = time.monotonic() - burst_t0
        codes = [a[0] for a in answers]
        assert codes[0] == 202
        assert answers[0][1]["triggered"] is True
        # At most one accepted trigger per minimum interval the burst lasted (on a loaded
        # machine 200 requests outlast several intervals), never one per trigger.
        windows = 2 + int(burst_s / 0.6)
        assert codes.count(202) <= windows, (codes.count(202), burst_s)
        assert codes.count(429) >= 200 - windows
        coalesced = next(a for a in answers if a[0] == 429)
        assert coalesced[1]["coalesced"] is True
        assert coalesced[2]["Retry-After"] == "1"
        assert set(codes) <= {202, 429}
        time.sleep(1.5)
        # the scheduled one, the triggered one, and at most one more per interval the burst
        # outlived; never one per trigger
        assert 2 <= len(started) <= 1 + windows, (len(started), burst_s)
        gaps = [b - a for a, b in itertools.pairwise(started)]
        assert all(g >= 0.55 for g in gaps), gaps  # the minimum interval holds
    finally:
        http.close()
        service.stop()


@pytest.fixture
def guarded() -> Iterator[tuple[str, list[int]]]:
    calls: list[int] = []

    def trigger() -> Ticket:
        calls.append(1)
        return Ticket(True, 0.0)

    srv = ControlServer("127.0.0.1", 0, trigger, None, trigger_secret=SECRET)
    srv.start()
    try:
        yield f"http://127.0.0.1:{srv.port}", calls
    finally:
        srv.close()


def test_a_configured_secret_is_required(guarded: tuple[str, list[int]]) -> None:
    """Defect (#15): POST /trigger was unauthenticated. With a secret configured, a
    trigger without it, or with a wrong one, is 403 and runs nothing."""
    base, calls = guarded
    assert _post(base)[0] == 403
    assert _post(base, **{SECRET_HEADER: "wrong"})[0] == 403
    assert _post(base, **{SECRET_HEADER: SECRET.decode()[:-1]})[0] == 403
    assert _post(base, **{SECRET_HEADER: SECRET.decode() + "x"})[0] == 403
    assert _post(base, **{SECRET_HEADER.lower(): "é" * 32})[0] == 403
    assert not calls
    assert _post(base, **{SECRET_HEADER: SECRET.decode()})[0] == 202
    assert calls == [1]


def test_secret_comparison() -> None:
    assert secret_matches(SECRET.decode(), SECRET)
    assert secret_matches(f" {SECRET.decode()} ", SECRET)  # header whitespace is not data
    assert not secret_matches(None, SECRET)
    assert not secret_matches("", SECRET)
    assert not secret_matches("\u20ac" * 32, SECRET)


def test_secret_file_rules(tmp_path: Path) -> None:
    f = tmp_path / "secret"
    f.write_bytes(SECRET + b"\n")
    assert read_secret(f) == SECRET  # the final newline of `echo` is not part of it
    for bad, why in (
        (b"short\n", "needs 16"),
        (SECRET + b"\nX-Other: 1", "one line"),
        (b"with a space " + SECRET, "one line"),
        ("é".encode() * 16, "one line"),
        (b"", "needs 16"),
    ):
        f.write_bytes(bad)
        with pytest.raises(InputError, match=f"trigger_secret_file: {f}: .*{why}"):
            read_secret(f)
    with pytest.raises(InputError, match="cannot read"):
        read_secret(tmp_path / "missing")


def test_service_reads_the_secret_at_start(make_cycle: CycleFactory, tmp_path: Path) -> None:
    cycle = make_cycle("off")
    settings = ServiceSettings(
        mode="off",
        interval_s=3600,
        http_port=0,
        kill_switch_file=tmp_path / "STOP",
        trigger_secret_file=tmp_path / "missing",
    )
    assert settings.trigger_secret_file == tmp_path / "missing"
    service = Service(settings.model_copy(update={"http_port": _free_port()}), cycle, cycle.lease)
    with pytest.raises(InputError, match=r"trigger_secret_file: .*missing: cannot read"):
        service.start()
    assert service.http is None


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
