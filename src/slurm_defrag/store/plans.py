"""Plans, their steps and the Slurm commands issued for them: records and CRUD.

Callers get frozen dataclasses, never ORM objects, so nothing they hold depends on an
open session.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import quote, unquote

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from slurm_defrag.store.database_errors import NotFound
from slurm_defrag.store.models import (
    OPEN_PLAN_STATUSES,
    PLAN_MODES,
    PLAN_STATUSES,
    STEP_STATES,
    Plan,
    PlanStep,
    SlurmCommand,
)

_TERMINAL_STEPS = ("done", "failed", "skipped")
_T = TypeVar("_T", Plan, PlanStep)


@dataclass(frozen=True)
class NewStep:
    """A step to add to a plan: ``action`` on ``target`` (a job id or node name)."""

    action: str
    target: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PlanRecord:
    id: int
    cluster: str
    snapshot_id: int | None
    created_at: datetime
    mode: str
    status: str
    inputs: dict[str, Any]
    solver_status: str | None
    objective: float | None
    bound: float | None
    solve_time_s: float | None
    holder: str | None
    closed_at: datetime | None
    note: str

    @property
    def open(self) -> bool:
        return self.status in OPEN_PLAN_STATUSES


@dataclass(frozen=True)
class StepRecord:
    id: int
    plan_id: int
    seq: int
    action: str
    target: str
    args: dict[str, Any]
    state: str
    error: str
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True)
class CommandRecord:
    id: int
    plan_id: int | None
    step_id: int | None
    started_at: datetime
    argv: list[str]
    exit_code: int | None
    stdout: str
    stderr: str
    duration_s: float
    dry_run: bool
    executed: bool = True
    """False: a dry-run preview of the command, never issued to Slurm (no exit code)."""

    @property
    def outcome(self) -> str:
        """The exit column as readers show it: the code, or why there is none."""
        if not self.executed:
            return "not executed (dry-run)"
        return "no exit code (Slurm unreachable)" if self.exit_code is None else str(self.exit_code)


def _plan(p: Plan) -> PlanRecord:
    return PlanRecord(
        id=p.id, cluster=p.cluster, snapshot_id=p.snapshot_id, created_at=p.created_at,
        mode=p.mode, status=p.status, inputs=dict(p.inputs), solver_status=p.solver_status,
        objective=p.objective, bound=p.bound, solve_time_s=p.solve_time_s, holder=p.holder,
        closed_at=p.closed_at, note=p.note,
    )  # fmt: skip


def _step(s: PlanStep) -> StepRecord:
    return StepRecord(
        id=s.id, plan_id=s.plan_id, seq=s.seq, action=s.action, target=s.target,
        args=dict(s.args), state=s.state, error=s.error, started_at=s.started_at,
        finished_at=s.finished_at,
    )  # fmt: skip


def _command(c: SlurmCommand) -> CommandRecord:
    return CommandRecord(
        id=c.id, plan_id=c.plan_id, step_id=c.step_id, started_at=c.started_at,
        argv=list(c.argv), exit_code=c.exit_code, stdout=c.stdout, stderr=c.stderr,
        duration_s=c.duration_s, dry_run=c.dry_run, executed=c.executed,
    )  # fmt: skip


def _one_of(what: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(allowed)}, not {value!r}")


class Plans:
    """CRUD for plans, steps and commands; each call is one transaction."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def create(
        self,
        cluster: str,
        mode: str,
        inputs: dict[str, Any],
        *,
        snapshot_id: int | None = None,
        solver_status: str | None = None,
        objective: float | None = None,
        bound: float | None = None,
        solve_time_s: float | None = None,
        holder: str | None = None,
        steps: Sequence[NewStep] = (),
    ) -> int:
        """Record a plan and its steps (in order) atomically; returns the plan id."""
        _one_of("mode", mode, PLAN_MODES)
        with Session(self._engine) as s, s.begin():
            plan = Plan(
                cluster=cluster, mode=mode, inputs=inputs, snapshot_id=snapshot_id,
                solver_status=solver_status, objective=objective, bound=bound,
                solve_time_s=solve_time_s, holder=holder, status="open", note="",
            )  # fmt: skip
            s.add(plan)
            s.flush()
            for i, step in enumerate(steps):
                s.add(_new_step(plan.id, i, step))
            return plan.id

    def record_past(
        self,
        cluster: str,
        mode: str,
        status: str,
        *,
        created_at: datetime,
        closed_at: datetime | None,
        steps: Sequence[tuple[NewStep, str, datetime | None]] = (),
        inputs: dict[str, Any] | None = None,
        snapshot_id: int | None = None,
        note: str = "",
    ) -> int:
        """Record a plan that ran elsewhere, with its own times: each step as (step, final
        state, finished at). For the simulator's history and imports; the service records
        its plans as they go (:meth:`create`, :meth:`set_step_state`)."""
        _one_of("mode", mode, PLAN_MODES)
        _one_of("status", status, PLAN_STATUSES)
        with Session(self._engine) as s, s.begin():
            plan = Plan(
                cluster=cluster, mode=mode, inputs=inputs or {}, snapshot_id=snapshot_id,
                status=status, created_at=created_at, closed_at=closed_at, note=note,
            )  # fmt: skip
            s.add(plan)
            s.flush()
            for i, (step, state, finished) in enumerate(steps):
                _one_of("state", state, STEP_STATES)
                row = _new_step(plan.id, i, step)
                row.state, row.started_at, row.finished_at = state, finished, finished
                s.add(row)
            return plan.id

    def get(self, plan_id: int) -> PlanRecord:
        with Session(self._engine) as s:
            return _plan(_get(s, Plan, plan_id))

    def recent(
        self, *, cluster: str | None = None, open_only: bool = False, limit: int = 50
    ) -> list[PlanRecord]:
        """Newest first."""
        q = select(Plan).order_by(Plan.id.desc()).limit(limit)
        if cluster is not None:
            q = q.where(Plan.cluster == cluster)
        if open_only:
            q = q.where(Plan.status.in_(OPEN_PLAN_STATUSES))
        with Session(self._engine) as s:
            return [_plan(p) for p in s.scalars(q)]

    def update(
        self,
        plan_id: int,
        *,
        status: str | None = None,
        solver_status: str | None = None,
        objective: float | None = None,
        bound: float | None = None,
        solve_time_s: float | None = None,
        note: str | None = None,
    ) -> PlanRecord:
        """Change the given fields; a terminal status stamps ``closed_at``."""
        with Session(self._engine) as s, s.begin():
            plan = _get(s, Plan, plan_id)
            if status is not None:
                _one_of("status", status, PLAN_STATUSES)
                plan.status = status
                plan.closed_at = None if status in OPEN_PLAN_STATUSES else datetime.now(UTC)
            for name, value in (
                ("solver_status", solver_status), ("objective", objective), ("bound", bound),
                ("solve_time_s", solve_time_s), ("note", note),
            ):  # fmt: skip
                if value is not None:
                    setattr(plan, name, value)
            s.flush()
            return _plan(plan)

    def add_steps(self, plan_id: int, steps: Sequence[NewStep]) -> list[int]:
        """Append steps after the plan's last one; returns their ids in order."""
        with Session(self._engine) as s, s.begin():
            _get(s, Plan, plan_id)
            last = s.scalar(select(PlanStep.seq).where(PlanStep.plan_id == plan_id)
                            .order_by(PlanStep.seq.desc()).limit(1))  # fmt: skip
            first = 0 if last is None else last + 1
            rows = [_new_step(plan_id, first + i, step) for i, step in enumerate(steps)]
            s.add_all(rows)
            s.flush()
            return [r.id for r in rows]

    def steps(self, plan_id: int) -> list[StepRecord]:
        with Session(self._engine) as s:
            q = select(PlanStep).where(PlanStep.plan_id == plan_id).order_by(PlanStep.seq)
            return [_step(x) for x in s.scalars(q)]

    def requeues_since(
        self, since: datetime, *, cluster: str | None = None, user: str | None = None
    ) -> int:
        """Requeue steps of ``enforce`` plans done at or after ``since`` (of ``user``'s jobs:
        the step's ``args["user"]``), counted in one query; dry-run requeues changed
        nothing, so they never count."""
        q = (select(func.count()).select_from(PlanStep).join(Plan, Plan.id == PlanStep.plan_id)
             .where(Plan.mode == "enforce", PlanStep.action == "requeue",
                    PlanStep.state == "done", PlanStep.finished_at >= since))  # fmt: skip
        if cluster is not None:
            q = q.where(Plan.cluster == cluster)
        if user is not None:
            q = q.where(PlanStep.args["user"].as_string() == user)
        with Session(self._engine) as s:
            return int(s.scalar(q) or 0)

    def requeue_usage_since(
        self,
        since: datetime,
        *,
        cluster: str | None = None,
        user: str | None = None,
        for_user: str | None = None,
    ) -> tuple[int, float]:
        """(requeues, GPU-hours lost) of the requeue steps :meth:`requeues_since` counts:
        of ``user``'s jobs (``args["user"]``), or of other users' jobs done for
        ``for_user``'s pending jobs (``args["for_users"]``, :func:`users_field`). The
        GPU-hours are the plan's ``args["lost_gpu_hours"]``. One query."""
        lost = func.coalesce(func.sum(PlanStep.args["lost_gpu_hours"].as_float()), 0.0)
        q = (select(func.count(), lost).select_from(PlanStep)
             .join(Plan, Plan.id == PlanStep.plan_id)
             .where(Plan.mode == "enforce", PlanStep.action == "requeue",
                    PlanStep.state == "done", PlanStep.finished_at >= since))  # fmt: skip
        if cluster is not None:
            q = q.where(Plan.cluster == cluster)
        if user is not None:
            q = q.where(PlanStep.args["user"].as_string() == user)
        if for_user is not None:
            # never for the victim's own user (the executor does not write that; a row
            # that says so anyway counts on the victim side only, as usage_by_user does)
            victim = func.coalesce(PlanStep.args["user"].as_string(), "")
            mine = PlanStep.args["for_users"].as_string()
            q = q.where(mine.contains(_one_user(for_user), autoescape=True), victim != for_user)
        with Session(self._engine) as s:
            n, hours = s.execute(q).one()
            return int(n or 0), float(hours or 0.0)

    def requeues_by_user_since(
        self, since: datetime, *, cluster: str | None = None
    ) -> list[tuple[str, float, list[str]]]:
        """(victim user, GPU-hours lost, users it was for) of every requeue step
        :meth:`requeues_since` counts, in one query: what every user's day holds on both
        sides (``PreemptionHistory.usage_by_user``). As many rows as requeues were done
        in the window, which the limits themselves keep small."""
        q = (select(PlanStep.args).join(Plan, Plan.id == PlanStep.plan_id)
             .where(Plan.mode == "enforce", PlanStep.action == "requeue",
                    PlanStep.state == "done", PlanStep.finished_at >= since))  # fmt: skip
        if cluster is not None:
            q = q.where(Plan.cluster == cluster)
        with Session(self._engine) as s:
            rows = list(s.scalars(q))
        return [
            (str(a.get("user") or ""), _hours(a.get("lost_gpu_hours")), _users(a.get("for_users")))
            for a in rows
        ]

    def set_step_state(self, step_id: int, state: str, error: str = "") -> StepRecord:
        """Move a step on; ``running`` stamps ``started_at``, a final state ``finished_at``."""
        _one_of("state", state, STEP_STATES)
        with Session(self._engine) as s, s.begin():
            step = _get(s, PlanStep, step_id)
            now = datetime.now(UTC)
            step.state = state
            step.error = error
            if state == "running" and step.started_at is None:
                step.started_at = now
            if state in _TERMINAL_STEPS:
                step.finished_at = now
            s.flush()
            return _step(step)

    def record_command(
        self,
        argv: Sequence[str],
        *,
        exit_code: int | None,
        duration_s: float,
        stdout: str = "",
        stderr: str = "",
        started_at: datetime | None = None,
        plan_id: int | None = None,
        step_id: int | None = None,
        dry_run: bool = False,
        executed: bool = True,
    ) -> int:
        """Record one Slurm command as issued; ``exit_code`` None = it never completed.

        ``executed`` False: a dry-run preview, never sent to Slurm (stored without an exit
        code whatever is passed)."""
        with Session(self._engine) as s, s.begin():
            row = SlurmCommand(
                argv=list(argv), exit_code=exit_code if executed else None,
                duration_s=duration_s, stdout=stdout, stderr=stderr,
                started_at=started_at or datetime.now(UTC), plan_id=plan_id,
                step_id=step_id, dry_run=dry_run, executed=executed,
            )  # fmt: skip
            s.add(row)
            s.flush()
            return row.id

    def commands(self, *, plan_id: int | None = None, limit: int = 100) -> list[CommandRecord]:
        """Oldest first (the order they were issued in)."""
        q = select(SlurmCommand).order_by(SlurmCommand.id)
        if plan_id is not None:
            q = q.where(SlurmCommand.plan_id == plan_id)
        with Session(self._engine) as s:
            return [_command(c) for c in s.scalars(q.limit(limit))]


_SEP = "|"


def users_field(users: Iterable[str]) -> str:
    """Users as one string a portable ``LIKE`` finds each of: ``|ann|bob|`` (``""`` for
    none). Each name is percent-encoded, so no name can contain the separator or look
    like part of another's entry."""
    names = sorted({quote(u, safe="") for u in users})
    return _SEP + _SEP.join(names) + _SEP if names else ""


def _one_user(user: str) -> str:
    return _SEP + quote(user, safe="") + _SEP


def _users(field: object) -> list[str]:
    """The users of a :func:`users_field` string (anything else: none)."""
    if not isinstance(field, str):
        return []
    return [unquote(u) for u in field.split(_SEP) if u]


def _hours(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _new_step(plan_id: int, seq: int, step: NewStep) -> PlanStep:
    return PlanStep(
        plan_id=plan_id, seq=seq, action=step.action, target=step.target, args=step.args,
        state="pending", error="",
    )  # fmt: skip


def _get(s: Session, model: type[_T], key: int) -> _T:
    row = s.get(model, key)
    if row is None:
        raise NotFound(f"no {model.__tablename__[:-1].replace('_', ' ')} {key} in the database")
    return row
