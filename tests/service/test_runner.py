"""The running service: APScheduler job options, /trigger, /healthz, clean stop."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from service_helpers import CycleFactory
from slurm_defrag.service.runner import CYCLE_JOB, Service, crash_hook
from slurm_defrag.service.settings import ServiceSettings


def _get(url: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_scheduler_trigger_and_health(make_cycle: CycleFactory, tmp_path: Path) -> None:
    cycle = make_cycle("off")
    settings = ServiceSettings(
        mode="off",
        interval_s=3600,
        http_port=0,
        kill_switch_file=tmp_path / "STOP",
        trigger_min_interval_s=0,
    )
    # http_port=0 disables the server; start one on a free port by hand instead.
    service = Service(settings, cycle, cycle.lease)
    service.start()
    try:
        job = service.scheduler.get_job(CYCLE_JOB)
        assert (job.max_instances, job.coalesce, job.misfire_grace_time) == (1, True, 30)
        deadline = time.monotonic() + 10
        while cycle.last is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert cycle.last is not None
        first = cycle.last
        from slurm_defrag.service.http import ControlServer

        http = ControlServer("127.0.0.1", 0, service.trigger, service.health)
        http.start()
        base = f"http://127.0.0.1:{http.port}"
        code, body = _get(base + "/healthz")
        assert code == 200
        assert body["mode"] == "off"
        assert isinstance(body["last_cycle"], dict)
        assert body["last_cycle"]["outcome"] == "off"
        req = urllib.request.Request(base + "/trigger", method="POST")
        with urllib.request.urlopen(req, timeout=5) as r:
            assert r.status == 202
        deadline = time.monotonic() + 10
        while cycle.last is first and time.monotonic() < deadline:
            time.sleep(0.05)
        assert cycle.last is not first  # the interval is an hour: the trigger ran it
        assert _get(base + "/nope")[0] == 404
        http.close()
    finally:
        service.stop()
    assert not cycle.lease.held  # released on stop, a standby takes over at once


def test_crash_hook_parses_its_spec() -> None:
    assert crash_hook(None) is None
    hook = crash_hook("requeue")
    assert hook is not None
    hook("reserve", "acted")  # not this step: nothing happens
    hook("requeue", "recorded")  # not this phase


@pytest.mark.parametrize("spec", ["requeue", "requeue:recorded"])
def test_crash_hook_exits_137(spec: str) -> None:
    import subprocess
    import sys

    kind, _, phase = spec.partition(":")
    code = (
        f"from slurm_defrag.service.runner import crash_hook\n"
        f"crash_hook({spec!r})({kind!r}, {(phase or 'acted')!r})\n"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 137


def test_a_taken_port_is_one_clear_error() -> None:
    import socket

    from slurm_defrag.errors import InputError
    from slurm_defrag.service.http import ControlServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(InputError, match=f"cannot listen on 127.0.0.1:{port}"):
            ControlServer("127.0.0.1", port, lambda: None, lambda: (True, {}))


def test_a_trigger_during_a_cycle_runs_one_more_cycle(
    make_cycle: CycleFactory, tmp_path: Path
) -> None:
    """APScheduler skips a run while one is going (max_instances=1); the trigger (the
    epilog saying GPUs were freed) must still get its cycle, right after the current one."""
    cycle = make_cycle("off")
    settings = ServiceSettings(
        mode="off",
        interval_s=3600,
        http_port=0,
        kill_switch_file=tmp_path / "STOP",
        trigger_min_interval_s=0,
    )
    service = Service(settings, cycle, cycle.lease)
    inner = cycle.run
    started = []

    def slow_run():  # type: ignore[no-untyped-def]
        started.append(time.monotonic())
        if len(started) == 1:
            service.trigger()  # arrives while the first cycle runs
            time.sleep(0.5)
        return inner()

    cycle.run = slow_run  # type: ignore[method-assign]
    service.start()
    try:
        deadline = time.monotonic() + 10
        while len(started) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(started) == 2  # the hour-long interval cannot explain the second one
        time.sleep(0.3)
        assert len(started) == 2  # and one trigger is one extra cycle, not a loop
    finally:
        service.stop()


# -- /healthz says whether Slurm was read (issue #45) ----------------------------------


class _Down:
    """A reader whose Slurm is not there (the cli backend without scontrol)."""

    name = "cli"

    def __init__(self, fake: object) -> None:
        self.fake = fake
        self.down = True

    def snapshot(self):  # type: ignore[no-untyped-def]
        from slurm_defrag.slurm.failures import SlurmUnavailableError

        if self.down:
            raise SlurmUnavailableError(
                "Slurm unavailable: scontrol --version: 'scontrol' is not on PATH"
            )
        return self.fake.snapshot()  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.fake, name)


def test_healthz_is_not_ok_until_slurm_was_read(
    make_cycle: CycleFactory, fake: object, tmp_path: Path
) -> None:
    """Was ``ok: true`` on a host where ``scontrol`` is missing: cycles ran on time, so
    the service looked healthy while it had never read Slurm."""
    reader = _Down(fake)
    cycle = make_cycle("dry-run", reader=reader)
    settings = ServiceSettings(mode="dry-run", http_port=0, kill_switch_file=tmp_path / "STOP")
    service = Service(settings, cycle, cycle.lease)
    service.scheduler.start(paused=True)  # running, as in a started service
    try:
        ok, body = service.health()
        assert (ok, body["reason"]) == (False, "no cycle has read Slurm yet")
        assert cycle.run().outcome == "slurm-unavailable"
        ok, body = service.health()
        assert not ok
        assert "the last read of Slurm" in str(body["reason"])
        assert "'scontrol' is not on PATH" in str(body["reason"])
        # liveness is not Slurm's state: the watchdog and slurm_defrag_up keep going
        assert service.healthy()
        reader.down = False
        assert cycle.run().outcome != "slurm-unavailable"
        ok, body = service.health()
        assert (ok, body["ok"], body["reason"]) == (True, True, None)
    finally:
        service.scheduler.shutdown(wait=False)


def test_healthz_of_a_standby_does_not_wait_for_a_read(
    make_cycle: CycleFactory, tmp_path: Path
) -> None:
    """A standby never reads Slurm (the leader does): it is healthy as a standby."""
    leader = make_cycle("off")
    standby = make_cycle("off", holder="test:2")
    leader.run()
    assert standby.run().outcome == "read-only"
    settings = ServiceSettings(mode="off", http_port=0, kill_switch_file=tmp_path / "STOP")
    service = Service(settings, standby, standby.lease)
    service.scheduler.start(paused=True)
    try:
        assert service.health()[0]
    finally:
        service.scheduler.shutdown(wait=False)
