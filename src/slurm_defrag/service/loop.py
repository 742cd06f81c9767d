"""One cycle of the service: lease, read, persist, advance or plan, act.

Order, and why:

1. the lease first: an instance that does not hold it takes no action and stores nothing
   (two instances would store every snapshot twice); it says so once per cycle;
2. one read of Slurm; if Slurm is unreachable the cycle ends there with one log line;
3. persist the snapshot with its metrics (history is kept whatever the mode);
4. ``mode = off`` or the kill switch ends the cycle here: no action at all;
5. advance plans already in flight (they hold reservations: finishing them first frees
   the cluster soonest); a cycle that advanced one does not plan, its snapshot is stale;
6. plan on the snapshot and execute: for real in ``enforce``; in ``dry-run`` the same
   executor runs against an in-memory copy of Slurm (descheduler's sandbox), so the plan,
   its steps and its commands are stored exactly as they would be, and nothing changes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError

from slurm_defrag.actuator.audit import AuditingWriter
from slurm_defrag.actuator.executor import Channel, Executor, Hook, Safety
from slurm_defrag.actuator.killswitch import KillSwitch
from slurm_defrag.actuator.packing import Packer
from slurm_defrag.actuator.route_file import RouteFile
from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.domain.plan import ActionKind, Plan
from slurm_defrag.metrics.cache import MetricsCache
from slurm_defrag.metrics.compute import compute
from slurm_defrag.packing.node_levers import IDLE_BUMP, LeverSettings
from slurm_defrag.packing.workload_mix import MixEstimate, job_class
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.planner.fingerprint import plan_inputs_fingerprint
from slurm_defrag.policy.file import Policy
from slurm_defrag.service.observer import NO_OBSERVER, Observer
from slurm_defrag.service.preemption_history import StoreHistory
from slurm_defrag.slurm.failures import SlurmError, SlurmUnavailableError
from slurm_defrag.slurm.fake import FakeSlurm
from slurm_defrag.slurm.port import SlurmReader, SlurmWriter
from slurm_defrag.store.lease import Lease
from slurm_defrag.store.repo import Repository

log = logging.getLogger(__name__)

UNSERVED_SHOWN = 3
"""Unserved targets whose explanation a "no plan" line names (one line per cycle)."""


@dataclass
class CycleReport:
    """What the last cycle did, for /healthz and the tests."""

    at: datetime
    outcome: str
    """``read-only`` | ``slurm-unavailable`` | ``off`` | ``idle`` | ``unchanged`` |
    ``advanced`` | ``planned`` | ``error`` (``unchanged``: the planner's inputs are those of
    the last plan, so it was not run again)"""
    detail: str = ""
    snapshot_id: int | None = None
    plans: dict[int, str] = field(default_factory=dict)
    """Plan database id -> status after this cycle."""


@dataclass(frozen=True)
class SlurmRead:
    """The last time a cycle read Slurm, and why it failed (None: it succeeded)."""

    at: datetime
    error: str | None = None


@dataclass(frozen=True)
class CycleDeps:
    """What a cycle talks to: Slurm (``reader`` for the snapshot and fresh reads, ``writer``
    for enforce plans), the database (``repo``), the ``lease`` and ``killswitch`` that gate
    any action, and the requeue ``history`` the limits count (default: read from ``repo``)."""

    reader: SlurmReader
    writer: SlurmWriter
    repo: Repository
    lease: Lease
    killswitch: KillSwitch
    history: StoreHistory | None = None
    route_file: RouteFile | None = None
    """Where the ``fgd-route`` levers write the cycle's route for job_submit.lua."""


@dataclass(frozen=True)
class CycleRules:
    """How a cycle decides: ``mode`` (``off`` | ``dry-run`` | ``enforce``), the ``policy``,
    how long a plan may stay in flight (``ttl_s``) and the Weight bump of packing
    (``packing_bump``; None = packing off, weights changed earlier are restored)."""

    mode: str
    policy: Policy
    ttl_s: float
    packing_bump: int | None = None
    packing_lever: str = IDLE_BUMP
    """Which lever packing runs (:data:`~slurm_defrag.packing.node_levers.LEVERS`); the
    default raises whole-free nodes by ``packing_bump``."""
    replan_after_s: float = 600.0
    """Re-plan at least this often even when the planner's inputs did not change: victims'
    costs grow with time, so the cheapest plan may change without any input changing."""


class Cycle:
    """Everything one cycle needs; :meth:`run` is the scheduler's job function."""

    def __init__(
        self,
        deps: CycleDeps,
        rules: CycleRules,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        hook: Hook | None = None,
        observer: Observer = NO_OBSERVER,
    ) -> None:
        self.mode = rules.mode
        self.observer = observer
        self.reader = deps.reader
        self.repo = deps.repo
        self.policy = rules.policy
        self.lease = deps.lease
        self.killswitch = deps.killswitch
        self.ttl_s = rules.ttl_s
        self.replan_after_s = rules.replan_after_s
        self._planned: tuple[str, datetime, str] | None = None
        """(fingerprint of the planner's inputs, when, plan id) of the last plan made."""
        self._last_plan: Plan | None = None
        self.clock = clock
        self.hook = hook
        self.history = deps.history or StoreHistory(deps.repo.plans)
        # Kept across cycles: a metrics pass recomputes only the node classes that changed.
        self.metrics_cache = MetricsCache()
        self.executor = self._executor(
            Channel(
                deps.reader,
                AuditingWriter(deps.writer, deps.repo.plans, dry_run=False),
                deps.repo.plans,
                "enforce",
                deps.lease.holder_id,
            ),
            hook,
        )
        self.packer = Packer(
            self.executor.writer, deps.repo.plans, rules.packing_bump or 0, deps.route_file
        )
        self.packing = rules.packing_bump is not None
        """Packing wanted; when False, weights changed earlier are restored."""
        self.lever_name = rules.packing_lever
        """The lever packing runs (:meth:`Packer.apply_levers`; idle-bump: :meth:`Packer.apply`)."""
        self.mix = MixEstimate()
        """``fgd-*`` levers: the workload mix, counted from the jobs of every snapshot."""
        self._mix_warm = False
        """The jobs stored before this process started are in :attr:`mix`."""
        self.last: CycleReport | None = None
        self.last_read: SlurmRead | None = None
        """The last snapshot read (None: no cycle has tried yet; a standby never does):
        /healthz is not ok until one succeeded, and while the last one failed."""

    def _executor(self, channel: Channel, hook: Hook | None) -> Executor:
        """The executor on ``channel``: the real Slurm, or the dry-run sandbox — the same
        code and the same safety rules either way; only the channel differs."""
        safety = Safety(self.policy, self.ttl_s, self.history, stop=self._stop)
        return Executor(channel, safety, clock=self.clock, hook=hook, observer=self.observer)

    def _stop(self) -> str | None:
        if not self.lease.held:
            return "lease lost"
        return self.killswitch.engaged()

    def run(self) -> CycleReport:
        """One cycle; never raises (a failing cycle is logged and the next one runs)."""
        started = time.perf_counter()
        try:
            report = self._run()
        except Exception as exc:  # the scheduler must keep going
            log.exception("cycle failed: %s", exc)
            report = CycleReport(self.clock(), "error", str(exc))
        self.last = report
        self.observer.cycle_done(report, time.perf_counter() - started)
        return report

    def _run(self) -> CycleReport:
        now = self.clock()
        if not self.lease.acquire():
            log.info("cycle: %s; taking no action", self.lease.describe())
            return CycleReport(now, "read-only", self.lease.describe())
        try:
            snapshot = self.reader.snapshot()
        except SlurmUnavailableError as exc:
            self.last_read = SlurmRead(now, str(exc))
            log.warning("cycle: %s; no action this cycle", exc)
            return CycleReport(now, "slurm-unavailable", str(exc))
        except SlurmError as exc:  # refused or unreadable: the cycle fails (run() logs it)
            self.last_read = SlurmRead(now, str(exc))
            raise
        self.last_read = SlurmRead(now)
        metrics = compute(snapshot, cache=self.metrics_cache)
        self.observer.measured(metrics)
        sid = self.repo.save_snapshot(snapshot, metrics, self.mode)
        if self.mode == "off" or (why := self.killswitch.engaged()):
            why = "mode=off" if self.mode == "off" else why
            self.packer.stop_routing()  # job_submit.lua stops naming nodes at once
            log.info("cycle: snapshot #%d stored; %s: no action", sid, why)
            return CycleReport(now, "off", why or "", sid)
        report = CycleReport(now, "idle", snapshot_id=sid)
        try:
            self._act(snapshot, sid, report)
            if self.mode == "enforce":
                self._pack(snapshot)
        except SlurmUnavailableError as exc:
            log.warning("cycle: %s; plans stay as they are until Slurm answers", exc)
            report.outcome, report.detail = "slurm-unavailable", str(exc)
        except SlurmError as exc:
            log.error("cycle: %s", exc)
            report.outcome, report.detail = "error", str(exc)
        return report

    def _act(self, snapshot: ClusterSnapshot, sid: int, report: CycleReport) -> None:
        now = report.at
        if self.mode == "enforce":
            open_plans = self.executor.open_plans()
            for rec in open_plans:
                report.plans[rec.id] = self.executor.advance(rec.id)
            self._heed_denied_writes()
            if open_plans:
                report.outcome = "advanced"
                return
        fp, targets = plan_inputs_fingerprint(snapshot, self.policy, self.history, now)
        last = self._planned
        if (
            last is not None
            and last[0] == fp
            and ((now - last[1]).total_seconds() < self.replan_after_s)
        ):
            # Same targets, candidate nodes, jobs, protections, policy and limit budget as
            # the last plan: planning again would give the same plan (1.5 s on 1,000 nodes).
            report.outcome = "unchanged"
            report.detail = f"planner inputs unchanged since plan {last[2]}: not re-planned"
            log.info("cycle: snapshot #%d; %s", sid, report.detail)
            return
        plan = make_plan(
            snapshot, self.policy, targets, history=self.history, now=now, previous=self._last_plan
        )  # warm start from the last plan
        self._planned = (fp, now, plan.plan_id)
        self._last_plan = plan if plan.status == "ok" else None
        self.observer.planned(plan)
        if self.mode == "enforce":
            pid = self.executor.admit(plan, sid)
            if pid is not None:
                self._planned = None  # it changes Slurm: plan afresh once it is done
                report.outcome = "planned"
                report.plans[pid] = self.executor.advance(pid)
                self._heed_denied_writes()
        else:
            pid = self._dry_run(plan, sid, snapshot)
            if pid is not None:
                report.outcome = "planned"
                report.plans[pid] = self.repo.plans.get(pid).status
        if report.outcome == "idle":
            report.detail = plan.reason or plan.status
            # An admin asking why a waiting job gets no plan (a budget, a protection) reads
            # it here: the first few targets' own explanations.
            why = [f"job {t.job_id}: {t.explanation}" for t in plan.targets if not t.served]
            shown = "".join(f"; {w}" for w in why[:UNSERVED_SHOWN])
            log.info("cycle: snapshot #%d; no plan: %s%s", sid, report.detail, shown)

    def _heed_denied_writes(self) -> None:
        """Drain plans off once Slurm refused a drain or resume for want of rights: the
        planner would propose the same drain every cycle and the executor roll it back
        every cycle (an Operator may requeue and reserve, not update nodes). Until the
        service restarts, which is when an admin has granted the rights or changed the
        policy."""
        refused = [
            f"{kind}: {why}"
            for kind, why in self.executor.denied.items()
            if kind in (ActionKind.DRAIN.value, ActionKind.RESUME.value)
        ]
        if not refused or not self.policy.drain.enabled:
            return
        drain = self.policy.drain.model_copy(update={"enabled": False})
        self.policy = self.policy.model_copy(update={"drain": drain})
        log.error(
            "drain plans off until the service restarts: Slurm refused %s. Draining and "
            "resuming nodes need AdminLevel=Admin for the service's user (docs/service.md); "
            "or set [drain] enabled = false in the policy",
            refused[0],
        )

    def _pack(self, snapshot: ClusterSnapshot) -> None:
        if not self.packing:
            self.packer.restore()  # packing was switched off: put the weights back
        elif self.lever_name == IDLE_BUMP:
            self.packer.apply(snapshot)
        elif (lever := self._lever(snapshot)) is not None:
            self.packer.apply_levers(snapshot, lever)

    def _lever(self, snapshot: ClusterSnapshot) -> LeverSettings | None:
        """This cycle's lever settings; an ``fgd-*`` lever gets the mix of the jobs seen
        so far (None before the first job: nothing to weigh fragmentation by)."""
        if not self.lever_name.startswith("fgd-"):
            return LeverSettings(self.lever_name)
        if not self._mix_warm:
            # a (re)started service: the jobs its database saw, in any mode, before this
            # one (measured: an estimate that starts empty costs Protocol A 0.1 point)
            self._mix_warm = True
            try:
                recent = self.repo.recent_jobs(snapshot.cluster, self.mix.keep)
            except SQLAlchemyError as exc:
                log.warning("packing: the jobs stored before could not be read (%s)", exc)
            else:
                per_gpu = snapshot.shards_per_gpu
                self.mix.observe((j.id, job_class(j, per_gpu)) for j in recent)
        self.mix.observe_snapshot(snapshot)
        mix = self.mix.mix()
        if mix is None:
            log.info("packing (%s): no job seen yet, no workload mix: not applied", self.lever_name)
            return None
        return LeverSettings(self.lever_name, mix=mix)

    def shutdown(self) -> None:
        """On a clean stop: restore packing weights if we hold the lease and may act."""
        if not self.lease.held or self.killswitch.engaged():
            return
        try:
            self.packer.restore()
        except SlurmError as exc:
            log.error("packing: weights not restored at shutdown: %s", exc)

    def _dry_run(self, plan: Plan, sid: int, snapshot: ClusterSnapshot) -> int | None:
        """Run ``plan`` to its first wait on a sandbox copy of Slurm and store it all."""
        if plan.status != "ok" or not plan.actions:
            return None
        if self._same_as_last_dry_run(plan):
            log.info(
                "cycle: dry-run plan %s is the same as the last one stored; skipped", plan.plan_id
            )
            return None
        # The snapshot just stored, as read (not loaded back: 0.3 s on 1,000 nodes).
        sandbox = FakeSlurm(snapshot, clock=self.clock, cache_reads=True)
        executor = self._executor(
            Channel(
                sandbox,
                AuditingWriter(sandbox, self.repo.plans, dry_run=True),
                self.repo.plans,
                "dry-run",
                self.lease.holder_id,
            ),
            hook=None,
        )
        for stale in executor.open_plans():
            # A dry-run plan is opened and closed within one cycle; an open one means the
            # process died in between. Its sandbox is gone, so it cannot be resumed.
            self.repo.plans.update(stale.id, status="aborted", note="dry-run interrupted")
        pid = executor.admit(plan, sid)
        if pid is None:
            return None
        status = executor.advance(pid)
        if status == "applying":
            waiting = next(s for s in self.repo.plans.steps(pid) if s.state == "running")
            self.repo.plans.update(
                pid, status="done",
                note=f"dry-run, not executed: nothing changed in Slurm; would wait at step "
                     f"{waiting.seq + 1} {waiting.action} for Slurm to act",
            )  # fmt: skip
            self.observer.plan_closed("dry-run", "done")
        log.info(
            "cycle: dry-run plan %s stored as #%d (not executed): %s",
            plan.plan_id, pid, plan.explanation,
        )  # fmt: skip
        return pid

    def _same_as_last_dry_run(self, plan: Plan) -> bool:
        last = next(
            (
                p
                for p in self.repo.plans.recent(limit=20)
                if p.mode == "dry-run" and p.status == "done"
            ),
            None,
        )
        if last is None:
            return False
        try:
            old = Plan.model_validate(last.inputs.get("plan"))
        except ValidationError:  # written by another version: just store the new one
            return False
        return _key(old) == _key(plan)


def _key(plan: Plan) -> tuple[object, ...]:
    return (
        tuple((t.job_id, tuple((p.node, p.gpus) for p in t.placements)) for t in plan.served),
        tuple(v.job_id for v in plan.victims),
    )
