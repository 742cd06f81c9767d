"""How much one plan, one hour and one user's day may be disrupted: the limits as data.

This module is the vocabulary both readers of the limits share: the ``[limits]`` table
(:class:`LimitsConfig`), where past requeues are counted (:class:`PreemptionHistory`), and
the typed error for each broken limit (descheduler's ``EvictionTotalLimitError`` ...), so a
caller can react by kind. The limits are read twice:

* the planner turns the remaining budget into solver constraints
  (:mod:`slurm_defrag.planner.budget`);
* the actuator enforces them again right before acting (:mod:`slurm_defrag.actuator.limits`,
  descheduler's evictor: the limits live in the actor), since counts may have moved since
  the plan was made.

History comes from a :class:`PreemptionHistory`: the database in production,
:class:`InMemoryPreemptionHistory` in tests and dry runs.

A user's day is limited from both sides (issue #40, "disruption fair per user"): as a
*victim* (requeues of their jobs and the GPU-hours those lost) and as a *beneficiary*
(requeues of other users' jobs done to start their pending jobs, and the GPU-hours lost).
The beneficiary side is what stops one user from having the service requeue everyone
else again and again by submitting many large jobs. Drains never count: they requeue
nothing and lose no work (see docs/planner.md, "Fairness per user").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Annotated, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from slurm_defrag.errors import DefragError, ExitCode

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


UNLIMITED = "unlimited"
"""How a TOML policy, which has no null, switches a limit with a default off."""


class LimitsConfig(BaseModel):
    """``[limits]`` of the policy file; a ``null`` (YAML) or ``"unlimited"`` limit is
    unlimited, an absent one has the default below (None: unlimited).

    The per-day limits count any sliding 24 hours, this plan's requeues included. Their
    defaults are sized in docs/planner.md ("Fairness per user").
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _unlimited(cls, value: object) -> object:
        return None if value == UNLIMITED else value

    max_victims_per_plan: Annotated[int, Field(ge=0)] | None = 8
    max_gpu_hours_lost_per_plan: Annotated[float, Field(ge=0)] | None = None
    """Unweighted GPU-hours of work lost, summed over the plan's victims."""
    max_preemptions_per_hour: Annotated[int, Field(ge=0)] | None = None
    """Requeues in any sliding hour, counting this plan's and past ones."""
    max_preemptions_per_user_per_day: Annotated[int, Field(ge=0)] | None = 8
    """Requeues of one user's jobs in any sliding 24 hours (victim side)."""
    max_gpu_hours_lost_per_user_per_day: Annotated[float, Field(ge=0)] | None = 64.0
    """GPU-hours of work one user's requeued jobs lost in any sliding 24 hours (victim
    side; unweighted, since the last checkpoint, as ``max_gpu_hours_lost_per_plan``)."""
    max_requeues_for_user_per_day: Annotated[int, Field(ge=0)] | None = 16
    """Requeues of *other* users' jobs done to start one user's pending jobs, in any
    sliding 24 hours (beneficiary side). A requeue that frees GPUs for targets of two
    users counts for both; a user's own jobs requeued for them never count here."""
    max_gpu_hours_lost_for_user_per_day: Annotated[float, Field(ge=0)] | None = 128.0
    """GPU-hours of work those requeues lost (beneficiary side)."""
    max_concurrent_plans: Annotated[int, Field(ge=1)] | None = 1
    """Plans being executed at once; a new plan is refused when this many are active."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Requeues and the GPU-hours of work they lost, over some window."""

    requeues: int = 0
    gpu_hours: float = 0.0

    def plus(self, lost_gpu_hours: float) -> Usage:
        """One requeue more, losing ``lost_gpu_hours``."""
        return Usage(self.requeues + 1, self.gpu_hours + lost_gpu_hours)


@dataclass(frozen=True)
class UserUsage:
    """Every user's usage over one window, from one read: as a victim (their jobs
    requeued) and as a beneficiary (other users' jobs requeued for their pending jobs)."""

    victim: Mapping[str, Usage] = field(default_factory=dict)
    beneficiary: Mapping[str, Usage] = field(default_factory=dict)

    def of(self, user: str) -> Usage:
        return self.victim.get(user, Usage())

    def for_(self, user: str) -> Usage:
        return self.beneficiary.get(user, Usage())

    @classmethod
    def count(cls, requeues: Iterable[tuple[str, float, Iterable[str]]]) -> UserUsage:
        """From (victim user, lost GPU-hours, users it was for) per requeue; a user's own
        job is never for them."""
        victim: dict[str, Usage] = {}
        beneficiary: dict[str, Usage] = {}
        for user, lost, for_users in requeues:
            victim[user] = victim.get(user, Usage()).plus(lost)
            for b in set(for_users) - {user}:
                beneficiary[b] = beneficiary.get(b, Usage()).plus(lost)
        return cls(victim, beneficiary)


@runtime_checkable
class PreemptionHistory(Protocol):
    """Recent requeues and running plans; the store implements it on the database."""

    def preemptions_since(self, since: datetime) -> int:
        """Requeues done by slurm-defrag at or after ``since``."""
        ...

    def user_preemptions_since(self, user: str, since: datetime) -> int:
        """Requeues of ``user``'s jobs at or after ``since``."""
        ...

    def victim_usage(self, user: str, since: datetime) -> Usage:
        """Requeues of ``user``'s jobs at or after ``since`` and the GPU-hours they lost."""
        ...

    def beneficiary_usage(self, user: str, since: datetime) -> Usage:
        """Requeues of other users' jobs done at or after ``since`` to start ``user``'s
        pending jobs, and the GPU-hours they lost."""
        ...

    def usage_by_user(self, since: datetime) -> UserUsage:
        """Both of the above for every user at once (one read: the planner asks about
        every user holding GPUs near a target, every cycle)."""
        ...

    def active_plans(self) -> int:
        """Plans started and not yet finished or abandoned."""
        ...


@dataclass(frozen=True, slots=True)
class Requeue:
    """One requeue, as :class:`InMemoryPreemptionHistory` keeps it."""

    at: datetime
    job_id: str
    user: str
    lost_gpu_hours: float = 0.0
    for_users: tuple[str, ...] = ()
    """Users whose pending jobs it freed GPUs for (the victim's own user left out)."""


@dataclass
class InMemoryPreemptionHistory:
    """A :class:`PreemptionHistory` kept in lists: for tests, dry runs and the CLI preview."""

    requeues: list[Requeue] = field(default_factory=list)
    running_plans: set[str] = field(default_factory=set)

    def record_requeue(
        self,
        at: datetime,
        job_id: str,
        user: str,
        lost_gpu_hours: float = 0.0,
        for_users: Iterable[str] = (),
    ) -> None:
        mine = tuple(sorted({u for u in for_users if u != user}))
        self.requeues.append(Requeue(at, job_id, user, lost_gpu_hours, mine))

    def start_plan(self, plan_id: str) -> None:
        self.running_plans.add(plan_id)

    def finish_plan(self, plan_id: str) -> None:
        self.running_plans.discard(plan_id)

    def preemptions_since(self, since: datetime) -> int:
        return sum(1 for r in self.requeues if r.at >= since)

    def user_preemptions_since(self, user: str, since: datetime) -> int:
        return self.victim_usage(user, since).requeues

    def victim_usage(self, user: str, since: datetime) -> Usage:
        return _usage(r for r in self.requeues if r.at >= since and r.user == user)

    def beneficiary_usage(self, user: str, since: datetime) -> Usage:
        return _usage(r for r in self.requeues if r.at >= since and user in r.for_users)

    def usage_by_user(self, since: datetime) -> UserUsage:
        return UserUsage.count(
            (r.user, r.lost_gpu_hours, r.for_users) for r in self.requeues if r.at >= since
        )

    def active_plans(self) -> int:
        return len(self.running_plans)


def _usage(requeues: Iterable[Requeue]) -> Usage:
    out = Usage()
    for r in requeues:
        out = out.plus(r.lost_gpu_hours)
    return out


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


class UserLimitError(LimitError):
    """A per-user limit; ``user`` is the victim (``per_user``) or the beneficiary
    (``for_user``) whose day is full."""

    def __init__(self, message: str, allowed: float, would_be: float, user: str) -> None:
        super().__init__(message, allowed, would_be)
        self.user = user


class PreemptionsPerUserDayLimitError(UserLimitError):
    limit = "max_preemptions_per_user_per_day"


class GpuHoursPerUserDayLimitError(UserLimitError):
    limit = "max_gpu_hours_lost_per_user_per_day"


class RequeuesForUserDayLimitError(UserLimitError):
    limit = "max_requeues_for_user_per_day"


class GpuHoursForUserDayLimitError(UserLimitError):
    limit = "max_gpu_hours_lost_for_user_per_day"


class ConcurrentPlansLimitError(LimitError):
    limit = "max_concurrent_plans"
