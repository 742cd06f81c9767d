"""How much one plan, one hour and one user's day may be disrupted.

The same checks run twice: the planner turns the remaining budget into solver constraints
(:func:`remaining_budget`), and the executor calls :func:`check_plan` /
:func:`check_requeue` again right before each requeue (counts may have moved since the
plan was made). Breaking a limit is a typed error (descheduler's
``EvictionTotalLimitError`` ...), so a caller can react by kind.

History comes from a :class:`PreemptionHistory`: the database in production,
:class:`InMemoryPreemptionHistory` in tests and dry runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Annotated, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from slurm_defrag.errors import DefragError, ExitCode

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


class LimitsConfig(BaseModel):
    """``[limits]`` of the policy file; an absent (or ``null``) limit is unlimited."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_victims_per_plan: Annotated[int, Field(ge=0)] | None = 8
    max_gpu_hours_lost_per_plan: Annotated[float, Field(ge=0)] | None = None
    """Unweighted GPU-hours of work lost, summed over the plan's victims."""
    max_preemptions_per_hour: Annotated[int, Field(ge=0)] | None = None
    """Requeues in any sliding hour, counting this plan's and past ones."""
    max_preemptions_per_user_per_day: Annotated[int, Field(ge=0)] | None = None
    """Requeues of one user's jobs in any sliding 24 hours."""
    max_concurrent_plans: Annotated[int, Field(ge=1)] | None = 1
    """Plans being executed at once; a new plan is refused when this many are active."""


@runtime_checkable
class PreemptionHistory(Protocol):
    """Recent requeues and running plans; the store implements it on the database."""

    def preemptions_since(self, since: datetime) -> int:
        """Requeues done by slurm-defrag at or after ``since``."""
        ...

    def user_preemptions_since(self, user: str, since: datetime) -> int:
        """Requeues of ``user``'s jobs at or after ``since``."""
        ...

    def active_plans(self) -> int:
        """Plans started and not yet finished or abandoned."""
        ...


@dataclass
class InMemoryPreemptionHistory:
    """A :class:`PreemptionHistory` kept in lists: for tests, dry runs and the CLI preview."""

    requeues: list[tuple[datetime, str, str]] = field(default_factory=list)
    """(time, job id, user)"""
    running_plans: set[str] = field(default_factory=set)

    def record_requeue(self, at: datetime, job_id: str, user: str) -> None:
        self.requeues.append((at, job_id, user))

    def start_plan(self, plan_id: str) -> None:
        self.running_plans.add(plan_id)

    def finish_plan(self, plan_id: str) -> None:
        self.running_plans.discard(plan_id)

    def preemptions_since(self, since: datetime) -> int:
        return sum(1 for t, _, _ in self.requeues if t >= since)

    def user_preemptions_since(self, user: str, since: datetime) -> int:
        return sum(1 for t, _, u in self.requeues if t >= since and u == user)

    def active_plans(self) -> int:
        return len(self.running_plans)


# -- typed limit errors ---------------------------------------------------------------


class LimitError(DefragError):
    """A limit would be broken. ``limit`` names the policy key."""

    exit_code = ExitCode.REFUSED
    limit = "limits"

    def __init__(self, message: str, allowed: float, would_be: float) -> None:
        super().__init__(f"limits.{self.limit}: {message}")
        self.allowed = allowed
        self.would_be = would_be


class VictimsPerPlanLimitError(LimitError):
    limit = "max_victims_per_plan"


class GpuHoursPerPlanLimitError(LimitError):
    limit = "max_gpu_hours_lost_per_plan"


class PreemptionsPerHourLimitError(LimitError):
    limit = "max_preemptions_per_hour"


class PreemptionsPerUserDayLimitError(LimitError):
    limit = "max_preemptions_per_user_per_day"

    def __init__(self, message: str, allowed: float, would_be: float, user: str) -> None:
        super().__init__(message, allowed, would_be)
        self.user = user


class ConcurrentPlansLimitError(LimitError):
    limit = "max_concurrent_plans"


@dataclass(frozen=True, slots=True)
class VictimRef:
    """What the limits need to know about one requeue."""

    job_id: str
    user: str
    lost_gpu_hours: float


# -- checks ---------------------------------------------------------------------------


def check_concurrent_plans(limits: LimitsConfig, history: PreemptionHistory) -> None:
    """Raise if no new plan may start now."""
    cap = limits.max_concurrent_plans
    active = history.active_plans()
    if cap is not None and active >= cap:
        raise ConcurrentPlansLimitError(
            f"{active} plan(s) already running, at most {cap} at once", cap, active + 1
        )


def plan_violations(
    victims: Sequence[VictimRef],
    limits: LimitsConfig,
    history: PreemptionHistory,
    now: datetime,
) -> list[LimitError]:
    """Every limit the plan's requeues would break, given the history (empty: all fine)."""
    out: list[LimitError] = []
    n = len(victims)
    if (cap := limits.max_victims_per_plan) is not None and n > cap:
        out.append(VictimsPerPlanLimitError(f"{n} victims, at most {cap}", cap, n))
    lost = sum(v.lost_gpu_hours for v in victims)
    if (gh := limits.max_gpu_hours_lost_per_plan) is not None and lost > gh + 1e-9:
        out.append(
            GpuHoursPerPlanLimitError(f"{lost:.2f} GPU-hours lost, at most {gh:g}", gh, lost)
        )
    if (ph := limits.max_preemptions_per_hour) is not None:
        total = history.preemptions_since(now - HOUR) + n
        if total > ph:
            out.append(PreemptionsPerHourLimitError(
                f"{total} requeues in the last hour with this plan, at most {ph}", ph, total))
    if (pu := limits.max_preemptions_per_user_per_day) is not None:
        per_user: dict[str, int] = {}
        for v in victims:
            per_user[v.user] = per_user.get(v.user, 0) + 1
        for user, k in sorted(per_user.items()):
            total = history.user_preemptions_since(user, now - DAY) + k
            if total > pu:
                out.append(PreemptionsPerUserDayLimitError(
                    f"user {user}: {total} requeues in 24 h with this plan, at most {pu}",
                    pu, total, user))
    return out


def check_plan(
    victims: Sequence[VictimRef],
    limits: LimitsConfig,
    history: PreemptionHistory,
    now: datetime,
) -> None:
    """Raise the first broken limit (all are in :func:`plan_violations`)."""
    broken = plan_violations(victims, limits, history, now)
    if broken:
        raise broken[0]


def check_requeue(
    victim: VictimRef,
    done_in_plan: Sequence[VictimRef],
    limits: LimitsConfig,
    history: PreemptionHistory,
    now: datetime,
) -> None:
    """For the executor, right before one requeue: would it break a limit?

    ``done_in_plan`` are this plan's requeues already performed *and not yet in the
    history*; pass an empty list if the executor records each requeue as it goes.
    """
    check_plan([*done_in_plan, victim], limits, history, now)


@dataclass(frozen=True, slots=True)
class Budget:
    """What one new plan may still spend, from the limits and the history (None = no cap)."""

    victims: int | None
    gpu_hours: float | None
    per_user: dict[str, int]
    """Remaining requeues per user, for the users asked about (absent = no cap)."""


def remaining_budget(
    limits: LimitsConfig, history: PreemptionHistory, now: datetime, users: Iterable[str]
) -> Budget:
    """Turn limits and history into caps for the plan being made (never negative)."""
    caps: list[int] = []
    if limits.max_victims_per_plan is not None:
        caps.append(limits.max_victims_per_plan)
    if limits.max_preemptions_per_hour is not None:
        caps.append(max(0, limits.max_preemptions_per_hour - history.preemptions_since(now - HOUR)))
    per_user: dict[str, int] = {}
    if (pu := limits.max_preemptions_per_user_per_day) is not None:
        for u in sorted(set(users)):
            per_user[u] = max(0, pu - history.user_preemptions_since(u, now - DAY))
    return Budget(
        victims=min(caps) if caps else None,
        gpu_hours=limits.max_gpu_hours_lost_per_plan,
        per_user=per_user,
    )
