"""The plan protocol: the one place that changes Slurm, one recorded step at a time.

Strategies and the planner only propose; this executor acts, and enforces again what the
planner already respected (descheduler's evictor): protections on a fresh read right
before every requeue, the policy's limits, one plan per node.

Every step is recorded ``running`` before it touches Slurm and ``done`` after, so after a
crash (even ``kill -9``) the database says which step may have half-happened; every
action is idempotent, so that step is simply run again. Waits never sleep: a waiting step
stays ``running`` and the next cycle looks again. A refusal or error, or the plan's TTL
passing, turns into a rollback: the undo steps are themselves recorded steps (``undo-*``),
so a crash in the middle of a rollback resumes the rollback.

Plan identity in Slurm is the planner's plan id: reservation ``defrag-<id>``, reasons
``slurm-defrag:<id> ...`` (see :class:`slurm_defrag.domain.plan.Plan`). The database id
of the plan row is only used inside the database.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum

from slurm_defrag.actuator.audit import AuditingWriter
from slurm_defrag.actuator.events import NO_ACTION_OBSERVER, ActionObserver
from slurm_defrag.actuator.limits import (
    VictimRef,
    beneficiaries,
    check_plan,
    check_requeue,
    victim_refs,
)
from slurm_defrag.actuator.step_errors import StepRefused
from slurm_defrag.domain.cluster import ClusterSnapshot, Job, JobState
from slurm_defrag.domain.plan import Action, ActionKind, Plan, TargetOutcome
from slurm_defrag.policy.cost import victim_cost
from slurm_defrag.policy.file import Policy
from slurm_defrag.policy.limits import LimitError, PreemptionHistory
from slurm_defrag.policy.protections import compile_protections
from slurm_defrag.slurm.failures import SlurmRejectedError, is_permission_denied
from slurm_defrag.slurm.port import NewReservation, SlurmReader
from slurm_defrag.store.plans import NewStep, PlanRecord, Plans, StepRecord, users_field

log = logging.getLogger(__name__)

Hook = Callable[[str, str], None]
"""``hook(step kind, phase)`` with phase ``acted`` (Slurm changed, step not yet recorded
done) or ``recorded``: the crash-injection point of the tests."""

UNDO = "undo-"
_FINAL = ("done", "failed", "skipped")


class Outcome(Enum):
    DONE = "done"
    WAITING = "waiting"


@dataclass(frozen=True)
class Channel:
    """Where an executor acts and records: the only difference between enforce and dry-run.

    ``reader`` gives the fresh reads right before acting and ``writer`` the auditing writer,
    both around the real backend (enforce) or the dry-run sandbox; ``plans`` is where plans,
    steps and commands are recorded; ``mode`` (``enforce`` | ``dry-run``) is recorded on
    each plan, with ``holder``, the identity of the service instance (its lease holder id)
    that admits it. The wording of logs and notes is the writer's
    (:attr:`AuditingWriter.voice`): what was done, or what would be done.
    """

    reader: SlurmReader
    writer: AuditingWriter
    plans: Plans
    mode: str
    holder: str | None = None


@dataclass(frozen=True)
class Safety:
    """What every step is checked against: the policy's protections and limits, the past
    requeues the limits count (``history``), how long a plan may stay in flight (``ttl_s``,
    then it is rolled back) and ``stop`` (why action must stop now: the kill switch)."""

    policy: Policy
    ttl_s: float
    history: PreemptionHistory
    stop: Callable[[], str | None] = lambda: None


class Executor:
    """Admits plans and advances them through Slurm.

    Parameters
    ----------
    channel
        Where it reads, writes and records (:class:`Channel`).
    safety
        What each step is checked against (:class:`Safety`).
    clock
        Now, for deadlines and protections (tests pass a fake clock).
    hook
        Called after each step acts / is recorded (crash injection in tests).
    observer
        Told of plans ending and victims requeued (the Prometheus counters).
    """

    def __init__(
        self,
        channel: Channel,
        safety: Safety,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        hook: Hook | None = None,
        observer: ActionObserver = NO_ACTION_OBSERVER,
    ) -> None:
        self.reader = channel.reader
        self.writer = channel.writer
        self.plans = channel.plans
        self.mode = channel.mode
        self.holder = channel.holder
        self.say = channel.writer.voice
        self.policy = safety.policy
        self.ttl = timedelta(seconds=safety.ttl_s)
        self.history = safety.history
        self.stop = safety.stop
        self.clock = clock
        self.hook = hook or (lambda kind, phase: None)
        self.observer = observer
        self.denied: dict[str, str] = {}
        """Step action -> Slurm's refusal, for steps refused for want of rights: the
        service turns off what needs them instead of planning it again every cycle."""

    # -- admission -----------------------------------------------------------------------

    def admit(self, plan: Plan, snapshot_id: int | None = None) -> int | None:
        """Record ``plan`` with its steps if it may run now; returns its database id.

        Refused (None, logged; a refused plan is stored ``aborted`` with the reason) when
        it has no actions, breaks a limit, or touches a node another open plan holds.
        """
        if plan.status != "ok" or not plan.actions:
            log.debug("plan %s: nothing to do (%s)", plan.plan_id, plan.reason or plan.status)
            return None
        nodes = sorted({n for a in plan.actions for n in a.nodes})
        busy = self._nodes_in_flight() & set(nodes)
        refusal = f"node(s) {', '.join(sorted(busy))} are in another open plan" if busy else ""
        if not refusal and self.mode == "enforce":
            refs = victim_refs(plan)
            try:
                check_plan(refs, self.policy.limits, self.history, datetime.now(UTC))
            except LimitError as exc:
                refusal = str(exc)
        victims = {v.job_id: v for v in plan.victims}
        # What the limits' history reads back (service/preemption_history.py): whose job,
        # the work it loses, whose pending jobs it is done for (the beneficiary side).
        steps = [
            NewStep(
                action=a.kind.value,
                target=a.job_id or ",".join(a.nodes) or (a.target or ""),
                args={
                    "action": a.model_dump(mode="json"),
                    "user": victims[a.job_id].user if a.job_id in victims else "",
                    "lost_gpu_hours": (
                        victims[a.job_id].lost_gpu_hours if a.job_id in victims else 0.0
                    ),
                    "for_users": (
                        users_field(beneficiaries(plan, a.job_id, victims[a.job_id].user))
                        if a.job_id in victims
                        else ""
                    ),
                },
            )
            for a in plan.actions
        ]
        deadline = self.clock() + self.ttl
        pid = self.plans.create(
            plan.cluster, self.mode,
            {"plan": plan.model_dump(mode="json"), "deadline": deadline.isoformat(),
             "nodes": nodes, "reservation": plan.reservation},
            snapshot_id=snapshot_id, solver_status=plan.solver.status,
            objective=plan.solver.objective, bound=plan.solver.bound,
            solve_time_s=plan.solver.runtime_s, holder=self.holder,
            steps=[] if refusal else steps,
        )  # fmt: skip
        if refusal:
            self.plans.update(pid, status="aborted", note=f"refused: {refusal}")
            self.observer.plan_closed(self.mode, "refused")
            log.warning("plan %s (#%d) refused%s: %s", plan.plan_id, pid, self.say.tag, refusal)
            return None
        log.info("plan %s (#%d) %s: %s", plan.plan_id, pid, self.say.admitted(), plan.explanation)
        return pid

    def _nodes_in_flight(self) -> set[str]:
        return {n for p in self.open_plans() for n in p.inputs.get("nodes", [])}

    def open_plans(self) -> list[PlanRecord]:
        """Open plans of this executor's mode, oldest first."""
        recs = self.plans.recent(open_only=True, limit=1000)
        # Only defrag plans: the packing record (actuator/packing.py) has no "plan".
        return sorted(
            (p for p in recs if p.mode == self.mode and "plan" in p.inputs), key=lambda p: p.id
        )

    # -- advancing -----------------------------------------------------------------------

    def advance(self, plan_db_id: int) -> str:
        """Run the plan's steps as far as they go now; returns the plan status after.

        Raises :class:`~slurm_defrag.slurm.failures.SlurmUnavailableError` when Slurm cannot
        be reached: nothing more is changed, the step stays as it was (``running``), and
        the next cycle runs it again.
        """
        rec = self.plans.get(plan_db_id)
        if not rec.open:
            return rec.status
        plan = Plan.model_validate(rec.inputs["plan"])
        steps = self.plans.steps(plan_db_id)
        if rec.status == "open":
            self.plans.update(plan_db_id, status="applying")
        if any(s.action.startswith(UNDO) for s in steps) or any(s.state == "failed" for s in steps):
            return self._undo(rec, plan, steps, rec.note or "rollback resumed")
        deadline = datetime.fromisoformat(rec.inputs["deadline"])
        if self.clock() > deadline:
            current = next((s for s in steps if s.state not in _FINAL), None)
            at = f" at step {current.seq + 1} {current.action}" if current else ""
            return self._rollback(
                rec, plan, steps, None, f"TTL {self.ttl.total_seconds():g} s passed{at}"
            )
        for step in steps:
            if step.state in _FINAL:
                continue
            if why := self.stop():
                log.warning(
                    "plan %s: %s: step %d %s not run", plan.plan_id, why, step.seq + 1, step.action
                )
                return "applying"
            action = Action.model_validate(step.args["action"])
            if step.state == "pending":
                self.plans.set_step_state(step.id, "running")
            try:
                with self.writer.step(plan_db_id, step.id):
                    outcome = self._run(plan, action)
            except (StepRefused, SlurmRejectedError) as exc:
                if isinstance(exc, SlurmRejectedError) and is_permission_denied(str(exc)):
                    self.denied[step.action] = str(exc)
                return self._rollback(
                    rec,
                    plan,
                    self.plans.steps(plan_db_id),
                    step,
                    f"step {step.seq + 1} {step.action}: {exc}",
                )
            if outcome is Outcome.WAITING:
                return "applying"
            self.hook(step.action, "acted")
            self.plans.set_step_state(step.id, "done")
            what = self._what(plan, step.action, action.job_id or "", action.target or "",
                              action.nodes)  # fmt: skip
            log.info(
                "plan %s: %s", plan.plan_id, self.say.step_done(step.seq + 1, step.action, what)
            )
            self.hook(step.action, "recorded")
        note = self._summary(plan)
        self.plans.update(plan_db_id, status="done", note=note)
        self.observer.plan_closed(self.mode, "done")
        log.info("plan %s (#%d) %s: %s", plan.plan_id, plan_db_id, self.say.plan_done(), note)
        return "done"

    def _run(self, plan: Plan, a: Action) -> Outcome:
        kind = a.kind
        if kind is ActionKind.RESERVE:
            target = _target(plan, a)
            # Whole nodes: Slurm 22.05 refuses TRES=gres/gpu reservations; IGNORE_JOBS lets
            # it be created while the victims still run. Outlives the plan's TTL a little
            # so the rollback, not Slurm, ends it.
            self.writer.create_reservation(
                NewReservation(
                    plan.reservation,
                    a.nodes,
                    int(self.ttl.total_seconds()) + 300,
                    users=[target.user] if target.user else ["root"],
                )
            )
            return Outcome.DONE
        if kind is ActionKind.DRAIN:
            for node in a.nodes:
                self.writer.update_node(node, State="DRAIN", Reason=a.reason)
            return Outcome.DONE
        if kind is ActionKind.REQUEUE:
            return self._requeue(plan, a)
        if kind is ActionKind.WAIT_FREE:
            return self._wait_free(plan, a)
        if kind is ActionKind.HAND_OVER:
            return self._hand_over(plan, a)
        if kind is ActionKind.RESUME:
            self._resume(plan, a.nodes)
            return Outcome.DONE
        if kind is ActionKind.RELEASE:
            return self._release(plan, a)
        raise StepRefused(f"unknown action {kind}")

    def _requeue(self, plan: Plan, a: Action) -> Outcome:
        assert a.job_id is not None
        fresh = self.reader.snapshot()  # fresh read: the PreEvictionFilter of descheduler
        if a.target:  # nobody is requeued for a target that was cancelled or held meanwhile
            _still_waiting(fresh, a.target)
        job = fresh.job_by_id.get(a.job_id)
        if job is None or job.state == JobState.PENDING or not job.holds_gpus:
            log.info(
                "requeue %s: already %s, nothing to do",
                a.job_id,
                "gone" if job is None else job.state.value,
            )
            return Outcome.DONE
        if not set(a.nodes) <= set(job.gpus):
            raise StepRefused(f"job {a.job_id} no longer runs on {','.join(a.nodes)}")
        reasons = list(compile_protections(self.policy.protections, self.clock()).reasons(job))
        if not job.requeue and "Requeue=0" not in reasons:
            reasons.append("Requeue=0")  # never requeue such a job, whatever the policy
        if reasons:
            raise StepRefused(f"job {a.job_id} is protected now: {'; '.join(reasons)}")
        # Work lost now, since the last checkpoint: what the planner priced and the
        # limits count (policy/cost.py), on the fresh read.
        now = self.clock()
        lost = victim_cost(job, now, self.policy.cost).lost_gpu_hours if job.start_time else 0.0
        if self.mode == "enforce":
            # The counts may have moved since the plan was made (other plans, other
            # instances): every limit again, for this job's user and for the users whose
            # pending jobs it is requeued for.
            try:
                check_requeue(
                    VictimRef(job.id, job.user, lost, beneficiaries(plan, job.id, job.user)),
                    [],
                    self.policy.limits,
                    self.history,
                    datetime.now(UTC),
                )
            except LimitError as exc:
                raise StepRefused(str(exc)) from None
        self.writer.requeue(a.job_id, a.reason)
        self.observer.requeued(self.mode, lost * 3600)
        return Outcome.DONE

    def _wait_free(self, plan: Plan, a: Action) -> Outcome:
        fresh = self.reader.snapshot()
        target = _target(plan, a)
        _still_waiting(fresh, target.job_id)
        busy = _busy(fresh, target)
        if busy:
            log.info("plan %s: waiting for %s%s", plan.plan_id, busy, self.say.tag)
            return Outcome.WAITING
        return Outcome.DONE

    def _hand_over(self, plan: Plan, a: Action) -> Outcome:
        fresh = self.reader.snapshot()
        target = _target(plan, a)
        job = _still_waiting(fresh, target.job_id)
        if job.state == JobState.PENDING:
            self.writer.update_job(target.job_id, ReservationName=plan.reservation)
        return Outcome.DONE

    def _resume(self, plan: Plan, nodes: tuple[str, ...]) -> None:
        fresh = self.reader.snapshot()
        tag = f"slurm-defrag:{plan.plan_id}"
        for name in nodes:
            node = fresh.node_by_name.get(name)
            # Only our own drain: an admin's drain (other reason) is left alone.
            if node is not None and node.drained and tag in node.reason:
                self.writer.update_node(name, State="RESUME")

    def _release(self, plan: Plan, a: Action) -> Outcome:
        fresh = self.reader.snapshot()
        target = _target(plan, a)
        job = fresh.job_by_id.get(target.job_id)
        if job is not None and job.state == JobState.PENDING:
            _still_waiting(fresh, target.job_id)  # held while handed over: roll back
            return Outcome.WAITING
        if job is not None and job.holds_gpus:
            planned = {p.node: set(p.gpus) for p in target.placements}
            actual = {n: set(g) for n, g in job.gpus.items()}
            if actual != planned:
                log.warning(
                    "plan %s: job %s runs on %s, planned %s", plan.plan_id, job.id, actual, planned
                )
        self._end_reservation(plan, target.job_id, running=job is not None and job.holds_gpus)
        return Outcome.DONE

    def _end_reservation(self, plan: Plan, job_id: str, *, running: bool) -> None:
        """Remove the reservation without touching the job that runs in it.

        Slurm 22.05 refuses to delete a reservation a running job is in; detaching the job
        first (``ReservationName=`` empty) makes the delete possible and leaves the job
        running (verified live, see docs/service.md).
        """
        if running:
            try:
                self.writer.update_job(job_id, ReservationName="")
            except SlurmRejectedError as exc:
                log.info(
                    "plan %s: detaching job %s from %s refused (%s); deleting anyway%s",
                    plan.plan_id,
                    job_id,
                    plan.reservation,
                    exc,
                    self.say.tag,
                )
        self.writer.delete_reservation(plan.reservation)

    # -- rollback ------------------------------------------------------------------------

    def _rollback(
        self,
        rec: PlanRecord,
        plan: Plan,
        steps: list[StepRecord],
        failed: StepRecord | None,
        why: str,
    ) -> str:
        log.warning("plan %s (#%d): %s: %s", plan.plan_id, rec.id, self.say.rolling_back(), why)
        if failed is not None:
            self.plans.set_step_state(failed.id, "failed", why)
        self.plans.update(rec.id, note=self.say.rolled_back(why))
        return self._undo(self.plans.get(rec.id), plan, self.plans.steps(rec.id), why)

    def _undo(self, rec: PlanRecord, plan: Plan, steps: list[StepRecord], why: str) -> str:
        forward = [s for s in steps if not s.action.startswith(UNDO)]
        undo = [s for s in steps if s.action.startswith(UNDO)]
        if not undo:
            undo_steps = _undo_steps(plan, forward)
            self.plans.add_steps(rec.id, undo_steps)
            undo = [s for s in self.plans.steps(rec.id) if s.action.startswith(UNDO)]
        for s in forward:
            if s.state == "pending":
                self.plans.set_step_state(s.id, "skipped", "plan rolled back")
            elif s.state == "running":
                self.plans.set_step_state(s.id, "failed", why)
        errors = []
        for s in undo:
            if s.state in _FINAL:
                if s.state == "failed":
                    errors.append(s.error)
                continue
            self.plans.set_step_state(s.id, "running")
            try:
                with self.writer.step(rec.id, s.id):
                    self._run_undo(plan, s)
            except SlurmRejectedError as exc:
                self.plans.set_step_state(s.id, "failed", str(exc))
                errors.append(str(exc))
                continue
            self.hook(s.action, "acted")
            self.plans.set_step_state(s.id, "done")
            what = self._what(plan, s.action, "", s.target, s.args.get("nodes", ()))
            log.info("plan %s: %s", plan.plan_id, self.say.step_done(s.seq + 1, s.action, what))
        status = "failed" if errors else "aborted"
        note = rec.note or self.say.rolled_back(why)
        if errors:
            note += "; undo failed: " + "; ".join(errors)
        self.plans.update(rec.id, status=status, note=note)
        self.observer.plan_closed(self.mode, "failed" if errors else "rolled-back")
        log.warning("plan %s (#%d) %s%s: %s", plan.plan_id, rec.id, status, self.say.tag, note)
        return status

    def _run_undo(self, plan: Plan, s: StepRecord) -> None:
        kind = s.action.removeprefix(UNDO)
        if kind == ActionKind.HAND_OVER:
            fresh = self.reader.snapshot()
            job = fresh.job_by_id.get(s.target)
            if job is not None and job.state == JobState.PENDING:
                # Else the job would stay pending on a reservation that is about to vanish.
                self.writer.update_job(s.target, ReservationName="")
        elif kind == ActionKind.RESERVE:
            fresh = self.reader.snapshot()
            job = fresh.job_by_id.get(s.target)
            self._end_reservation(plan, s.target, running=job is not None and job.holds_gpus)
        elif kind == ActionKind.DRAIN:
            self._resume(plan, tuple(s.args.get("nodes", ())))

    def _summary(self, plan: Plan) -> str:
        served = ", ".join(
            f"job {t.job_id} on " + " ".join(f"{p.node}:{list(p.gpus)}" for p in t.placements)
            for t in plan.served
        )
        victims = ", ".join(v.job_id for v in plan.victims) or "none"
        return self.say.summary(served, victims)

    def _what(self, plan: Plan, kind: str, job: str, target: str, nodes: Sequence[str]) -> str:
        return self.say.action(
            kind, job=job, target=target, nodes=nodes, reservation=plan.reservation
        )


def _undo_steps(plan: Plan, forward: list[StepRecord]) -> list[NewStep]:
    """Undo what may have happened, newest first. Requeues cannot be undone: the victims
    are pending again and Slurm runs them when it can."""
    out = []
    for s in reversed(forward):
        if s.state not in ("done", "running", "failed"):
            continue
        a = Action.model_validate(s.args["action"])
        if a.kind in (ActionKind.HAND_OVER, ActionKind.RESERVE):
            out.append(NewStep(UNDO + a.kind.value, a.target or "", {"nodes": list(a.nodes)}))
        elif a.kind is ActionKind.DRAIN:
            out.append(NewStep(UNDO + a.kind.value, ",".join(a.nodes), {"nodes": list(a.nodes)}))
    # A reservation may exist even if RESERVE is not yet recorded done (crash right after
    # it acted): removing an absent one is a no-op, so always end with it.
    if not any(n.action == UNDO + ActionKind.RESERVE for n in out):
        target = next((a.target for a in plan.actions if a.target), "")
        out.append(NewStep(UNDO + ActionKind.RESERVE.value, target or "", {"nodes": []}))
    return out


def _target(plan: Plan, a: Action) -> TargetOutcome:
    for t in plan.targets:
        if t.job_id == a.target:
            return t
    raise StepRefused(f"action {a.step} names target {a.target}, not in the plan")


TARGET_HOLDS = frozenset({"JobHeldUser", "JobHeldAdmin"})
"""Pending reasons that end a plan: the target's owner (or an admin) held it, so the block
would sit reserved for a job that will not start (issue #40: an owner could hold the
target mid-plan and keep other users off the freed nodes until the TTL)."""


def _still_waiting(fresh: ClusterSnapshot, job_id: str) -> Job:
    job = fresh.job_by_id.get(job_id)
    if job is None or job.state not in (JobState.PENDING, JobState.RUNNING):
        raise StepRefused(
            f"target job {job_id} is "
            f"{'gone' if job is None else job.state.value}: nothing to free for"
        )
    if job.state == JobState.PENDING and job.reason in TARGET_HOLDS:
        raise StepRefused(f"target job {job_id} is held ({job.reason}): nothing to free for")
    return job


def _busy(fresh: ClusterSnapshot, target: TargetOutcome) -> str:
    """Who still holds the target's planned GPUs ('' when all are free)."""
    out = []
    for p in target.placements:
        owners = fresh.gpu_owners.get(p.node)
        if owners is None:
            raise StepRefused(f"node {p.node} is gone")
        held = sorted({o for g in p.gpus if (o := owners[g]) is not None and o != target.job_id})
        if held:
            out.append(f"{p.node}: {', '.join(held)}")
    return "; ".join(out)
