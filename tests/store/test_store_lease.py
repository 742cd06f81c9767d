"""The leader lease: one holder at a time, and a dead holder is replaced within the TTL.

The in-process tests pin the rules; the process tests run two real instances
(``lease_worker.py``), ``kill -9`` the leader and time the takeover, on SQLite and on
PostgreSQL.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_defrag.store.database import Store
from slurm_defrag.store.lease import Lease

WORKER = Path(__file__).with_name("lease_worker.py")
TTL = 2.0


def test_one_holder_at_a_time(store: Store) -> None:
    a, b = Lease(store, "a", ttl_s=30), Lease(store, "b", ttl_s=30)
    assert a.acquire()
    assert a.held
    assert a.epoch == 1
    assert not b.acquire()
    assert not b.held
    assert "read-only" in b.describe()
    assert "held by a" in b.describe()
    assert a.renew()
    assert a.epoch == 1  # renewing is not a new term
    a.release()
    assert not a.held
    assert b.acquire()
    assert b.epoch == 2  # a new holder: the fencing token grows
    assert not a.renew()  # a's term is over


def test_expired_lease_is_taken_over(store: Store) -> None:
    a, b = Lease(store, "a", ttl_s=0.3), Lease(store, "b", ttl_s=30)
    assert a.acquire()
    assert not b.acquire()
    time.sleep(0.4)
    assert not a.held  # a stops acting at its own deadline, before anyone takes over
    assert b.acquire()
    assert not a.renew()
    assert a.info() is not None
    assert a.info().holder == "b"  # type: ignore[union-attr]


def test_bad_ttl() -> None:
    with pytest.raises(ValueError, match="positive"):
        Lease(None, "x", ttl_s=0)  # type: ignore[arg-type]


class Worker:
    """A running lease_worker.py whose output lines arrive on a queue."""

    def __init__(self, url: str, holder: str) -> None:
        self.holder = holder
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), url, holder, str(TTL)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())

    def wait_for(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line.startswith(prefix):
                return line
        raise AssertionError(f"{self.holder}: no {prefix!r} line within {timeout} s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def workers(store: Store) -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for w in started:
        w.stop()


@pytest.mark.slow  # two processes and a lease expiry in real time
def test_two_processes_and_kill_9(store: Store, workers: list[Worker]) -> None:
    url = store.engine.url.render_as_string(hide_password=False)
    # Both start at once and race for the lease: exactly one must win.
    workers += [Worker(url, "one"), Worker(url, "two")]
    # Interpreter start-up can be slow on a busy host, hence the generous first timeout.
    first = {w.holder: w.wait_for("", timeout=60) for w in workers}
    leaders = [w for w in workers if first[w.holder].startswith("LEADER")]
    assert len(leaders) == 1, first
    leader = leaders[0]
    (standby,) = (w for w in workers if w is not leader)
    assert f"held by {leader.holder}" in first[standby.holder]
    # While the leader lives, the standby never takes over (several renew periods).
    with pytest.raises(AssertionError):
        standby.wait_for("LEADER", timeout=1.5 * TTL)

    os.kill(leader.proc.pid, signal.SIGKILL)
    killed = time.monotonic()
    line = standby.wait_for("LEADER", timeout=TTL + 10)
    took = time.monotonic() - killed
    assert "epoch=2" in line
    # Lease time plus one retry period; the slack covers a heavily loaded CI machine.
    assert took < TTL + TTL / 5 + 3.0, f"takeover took {took:.1f} s"
