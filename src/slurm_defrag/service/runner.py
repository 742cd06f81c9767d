"""The running service: APScheduler job, lease renewal, HTTP endpoint, clean shutdown.

Synchronous on purpose (STYLE: BackgroundScheduler, no asyncio): a cycle is a handful of
Slurm commands and never sleeps, since waits are steps that the next cycle looks at again.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.schedulers.background import (  # type: ignore[import-untyped]
    BackgroundScheduler,
)
from sqlalchemy.exc import SQLAlchemyError

from slurm_defrag.actuator.executor import Hook
from slurm_defrag.actuator.killswitch import KillSwitch
from slurm_defrag.service import notify
from slurm_defrag.service.http import ControlServer, Page
from slurm_defrag.service.loop import Cycle
from slurm_defrag.service.settings import ServiceSettings
from slurm_defrag.service.trigger import Ticket, TriggerGate, read_secret
from slurm_defrag.store.lease import Lease

log = logging.getLogger(__name__)

CYCLE_JOB = "cycle"


def crash_hook(spec: str | None) -> Hook | None:
    """The ``test_crash_after`` hook: exit 137 at once, like ``kill -9``, at that step."""
    if not spec:
        return None
    kind, _, phase = spec.partition(":")
    phase = phase or "acted"

    def hook(k: str, ph: str) -> None:
        if (k, ph) == (kind, phase):
            log.warning("test_crash_after=%s: exiting with status 137 now", spec)
            logging.shutdown()
            os._exit(137)

    return hook


class Service:
    """Owns the scheduler and the HTTP server around one :class:`Cycle`."""

    def __init__(
        self,
        settings: ServiceSettings,
        cycle: Cycle,
        lease: Lease,
        pages: dict[str, Page] | None = None,
    ) -> None:
        self.settings = settings
        self.pages = dict(pages or {})
        """Read-only GET routes beside /trigger and /healthz (metrics, web page)."""
        self.cycle = cycle
        self.lease = lease
        self.started_at = datetime.now(UTC)
        self.scheduler = BackgroundScheduler(timezone=UTC)
        self.http: ControlServer | None = None
        self.stopped = threading.Event()
        self._last_done: float | None = None  # time.monotonic() when a cycle last ended
        self.gate = TriggerGate(settings.trigger_min_interval_s)
        self._stopping = threading.Event()

    def start(self) -> None:
        s = self.settings
        # Bind first: a taken port must stop the service before any cycle runs.
        if s.http_port:
            secret = read_secret(s.trigger_secret_file) if s.trigger_secret_file else None
            self.http = ControlServer(
                s.http_host,
                s.http_port,
                self.trigger,
                self.health,
                self.pages,
                allow=s.http_allow,
                names=s.http_names,
                trigger_secret=secret,
            )
        self.scheduler.add_job(
            self._run_cycle, "interval", seconds=s.interval_s, id=CYCLE_JOB,
            # One cycle at a time; a backlog of missed runs becomes one run, and a run
            # late by more than the grace time is skipped (the next one is due soon).
            max_instances=1, coalesce=True, misfire_grace_time=int(s.misfire_grace_s),
            next_run_time=datetime.now(UTC),
        )  # fmt: skip
        self.scheduler.add_job(
            self._renew, "interval", seconds=max(1.0, s.lease_ttl_s / 3), id="lease",
            max_instances=1, coalesce=True,
        )  # fmt: skip
        watchdog = notify.watchdog_interval_s()
        if watchdog is not None:
            self.scheduler.add_job(
                self._feed_watchdog,
                "interval",
                seconds=watchdog,
                id="watchdog",
                max_instances=1,
                coalesce=True,
            )
        self.scheduler.start()
        if self.http is not None:
            self.http.start()
        log.info(
            "serving: mode=%s, backend %s, every %g s, plan TTL %g s, holder %s",
            s.mode,
            s.slurm.backend,
            s.interval_s,
            s.plan_ttl_s,
            s.holder_id,
        )
        notify.notify(f"READY=1\nSTATUS=serving, mode {s.mode}, every {s.interval_s:g} s")

    def _feed_watchdog(self) -> None:
        # Fed only while cycles run on time (the same rule as /healthz): a cycle stuck in
        # a Slurm command that never returns stops the feeding, and systemd restarts us.
        if self.healthy():
            notify.notify("WATCHDOG=1")
        else:
            log.warning(
                "watchdog not fed: no cycle ended for over %g s", 3 * self.settings.interval_s + 60
            )

    def _run_cycle(self) -> None:
        # A trigger that arrives while a cycle runs cannot start a second instance
        # (max_instances=1: APScheduler skips it), so it is remembered and served here,
        # right after this cycle if it is due by then (else the scheduler runs it when it
        # is due): the epilog's "GPUs were just freed" is never lost.
        while True:
            self.gate.cycle_started()
            self.cycle.run()
            self._last_done = time.monotonic()
            if (last := self.cycle.last) is not None:
                notify.notify(f"STATUS=last cycle {last.at:%H:%M:%S} UTC: {last.outcome}")
            if not self.gate.due_now() or self._stopping.is_set():
                return
            log.info("running the cycle triggered during the last one")

    def _renew(self) -> None:
        # Between cycles only renew a grant we have; taking the lease is the cycle's job.
        if self.lease.held and not self.lease.renew():
            log.warning("lease lost: %s", self.lease.describe())

    def trigger(self) -> Ticket:
        """Run a cycle as soon as the current one (if any) is over and the minimum interval
        since the last one has passed; while one is pending, further triggers only join it."""
        ticket = self.gate.request()
        if not ticket.scheduled:
            return ticket
        job = self.scheduler.get_job(CYCLE_JOB)
        if job is not None:
            at = datetime.now(UTC) + timedelta(seconds=ticket.delay_s)
            # Never later than the cycle already planned: that one serves the trigger too.
            if job.next_run_time is None or job.next_run_time > at:
                job.modify(next_run_time=at)
                self.scheduler.wakeup()
            log.info("cycle triggered over HTTP, in %.1f s", ticket.delay_s)
        return ticket

    def healthy(self) -> bool:
        """Cycles run on time. No database access: ``/metrics`` asks at every scrape and
        must answer while the database is down."""
        # Liveness only: cycles stopped happening (hung Slurm command, dead scheduler). A
        # Slurm that does not answer makes /healthz say so (health()), but must not stop
        # the watchdog: systemd would restart a service that is only waiting for Slurm.
        age_limit = 3 * self.settings.interval_s + 60
        done = self._last_done
        fresh = done is None or time.monotonic() - done < age_limit
        return bool(self.scheduler.running) and fresh

    def slurm_problem(self) -> str | None:
        """Why Slurm cannot be counted on, or None: no cycle has read it yet, or the last
        read failed. A standby (``read-only``: another instance holds the lease) does not
        read Slurm, by design: nothing to say."""
        last, read = self.cycle.last, self.cycle.last_read
        if last is not None and last.outcome == "read-only":
            return None
        if read is None:
            return "no cycle has read Slurm yet"
        if read.error is not None:
            return f"the last read of Slurm ({read.at:%Y-%m-%d %H:%M:%S} UTC) failed: {read.error}"
        return None

    def kill_switch(self) -> str | None:
        return KillSwitch(self.settings.kill_switch_file).engaged()

    def health(self) -> tuple[bool, dict[str, Any]]:
        """``/healthz``: ok when cycles run on time and the last one read Slurm (a
        standby's, which does not read it, counts too); ``reason`` says why not."""
        last = self.cycle.last
        reason = None
        if not self.healthy():
            reason = (
                f"no cycle ended for over {3 * self.settings.interval_s + 60:g} s"
                if self.scheduler.running
                else "the scheduler is not running"
            )
        else:
            reason = self.slurm_problem()
        ok = reason is None
        try:
            lease = self.lease.describe()
        except SQLAlchemyError as exc:  # a standby asks the database who leads
            lease = f"unknown: database error: {type(exc).__name__}"
        return ok, {
            "ok": ok,
            "reason": reason,
            "mode": self.settings.mode,
            "lease": lease,
            "started_at": self.started_at.isoformat(),
            "last_cycle": None
            if last is None
            else {
                "at": last.at.isoformat(),
                "outcome": last.outcome,
                "detail": last.detail,
                "snapshot_id": last.snapshot_id,
                "plans": last.plans,
            },
            "kill_switch": self.kill_switch(),
        }

    def stop(self) -> None:
        """Graceful stop: finish the running cycle's step, restore packing weights, give the
        lease up.

        A cycle never blocks for long (waits are steps looked at again), so waiting for it
        is bounded by one Slurm command per step. Plans in flight stay recorded and are
        resumed (or rolled back at their TTL) by the next instance.
        """
        log.info("stopping: waiting for the current cycle to finish")
        notify.notify("STOPPING=1")
        self._stopping.set()
        if self.http is not None:
            self.http.close()
        self.scheduler.shutdown(wait=True)
        self.cycle.shutdown()  # packing weights back, while we still hold the lease
        self.lease.release()
        self.stopped.set()
        log.info("stopped")
