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
"""

from __future__ import annotations

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
