"""Live (issue #8): the epilog wakes the real service, in its container beside slurmctld.

The hooks are installed as in the other live plugin tests (``installed``), but the epilog
points at its default URL, ``http://127.0.0.1:8787/trigger``: the service container shares
slurmctld's network namespace (docker-compose.yml ``defrag``), so that is the service. It
runs with a 300 s interval, so after its start-up cycle only a trigger explains a cycle.

* Ending a GPU job stores a new snapshot (a cycle ran) within 2 s of the job's end.
* With the service stopped, a GPU job still ends COMPLETED, its COMPLETING phase as short
  as with the service up, and the epilog's worker logs the refused connection.

Measured delays are printed (``-s``) for docs/benchmarks.md.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from service_container import (
    DEFAULT_PORT,
    ServiceContainer,
    image_ready,
    listening_ports,
    scratch_database,
)
from sqlalchemy import text

from plugins.plugins_support import EPILOG_LOG, Installed, require, set_epilog_url
from slurm_defrag.store.engine import make_engine

from .test_live_epilog import completing_ms, end_epoch, final_state

pytestmark = pytest.mark.slurm

SERVICE_URL = f"http://127.0.0.1:{DEFAULT_PORT}/trigger"  # the epilog's default


def snapshot_times(db_url: str) -> list[float]:
    """``taken_at`` (epoch s) of every snapshot the service stored: one per cycle."""
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            return [float(t) for (t,) in conn.execute(text("SELECT t FROM snapshots ORDER BY id"))]
    finally:
        engine.dispose()


def wait_snapshot_after(db_url: str, epoch: float, timeout_s: float) -> float | None:
    """The first snapshot taken at or after ``epoch``, waiting up to ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        later = [t for t in snapshot_times(db_url) if t >= epoch]
        if later:
            return later[0]
        time.sleep(0.2)
    return None


def test_epilog_wakes_the_service_container_and_jobs_end_without_it(
    installed: Installed, tmp_path: Path
) -> None:
    require(image_ready(), "the service image (scripts/cluster.sh build)")
    c = installed.cluster
    assert DEFAULT_PORT not in listening_ports(), (
        f"something already listens on {DEFAULT_PORT} beside slurmctld "
        "(a running `scripts/cluster.sh defrag up`?)"
    )
    db = scratch_database()
    # No trigger throttle here: the job ends 2-3 s after the start-up cycle, and the
    # default throttle (a triggered cycle starts >= 5 s after the last one started) would
    # hold its trigger that long. This test measures the path epilog -> cycle; the
    # throttle has its own tests (tests/service/test_trigger.py).
    svc = ServiceContainer.start(
        "epilog", db, mode="dry-run", interval_s=300, trigger_min_interval_s=0
    )
    try:
        svc.wait_healthy()
        set_epilog_url(c, SERVICE_URL, tmp_path)
        c.sh(f": > {EPILOG_LOG}")

        # -- service up: the job's end runs a cycle -------------------------------------
        rc, job, err = c.sbatch("--gres=gpu:1", wrap="sleep 1")
        assert rc == 0, err
        up_ms, transcript = completing_ms(c, job)
        ended = end_epoch(c, job)
        # EndTime has whole seconds: ``taken - ended`` bounds the real delay from above
        taken = wait_snapshot_after(db.host_url, ended, timeout_s=30)
        assert taken is not None, (svc.logs()[-2000:], c.sh(f"cat {EPILOG_LOG}"))
        delay = taken - ended
        assert delay < 2.0, f"cycle {delay:.2f} s after the job ended"
        assert "cycle triggered over HTTP" in svc.logs()
        assert final_state(c, job) == ("COMPLETED", "0:0")
        assert up_ms < 800, f"COMPLETING for {up_ms} ms with the service up:\n{transcript}"

        # -- service stopped: jobs end normally and quickly -----------------------------
        assert svc.stop() == 0, svc.logs()
        rc, job, err = c.sbatch("--gres=gpu:1", wrap="sleep 1")
        assert rc == 0, err
        down_ms, transcript = completing_ms(c, job)
        assert down_ms < 800, f"COMPLETING for {down_ms} ms, service stopped:\n{transcript}"
        assert final_state(c, job) == ("COMPLETED", "0:0")
        # the epilog's worker gives up within its 1 s timeout and logs why
        line = f"job {job}: trigger failed"
        log = c.sh(
            f"timeout 5 sh -c 'until grep -q \"{line}\" {EPILOG_LOG}; do sleep 0.2; done';"
            f" grep 'job {job}:' {EPILOG_LOG}",
            check=False,
        )
        assert "curl exit 7" in log, log  # connection refused: nobody on 127.0.0.1:8787
        print(
            f"\nepilog -> service container: cycle {delay:.2f} s after the job's EndTime "
            f"(whole seconds); COMPLETING {up_ms} ms with the service up, {down_ms} ms "
            "with it stopped"
        )
    finally:
        set_epilog_url(c, installed.url, tmp_path)
        svc.remove()
        db.drop()
