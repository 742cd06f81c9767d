"""What a new plan may still spend: the limits and the history turned into solver caps.

The planner's reading of :mod:`slurm_defrag.policy.limits`; the executor enforces the same
limits again right before acting (:mod:`slurm_defrag.actuator.limits`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from slurm_defrag.policy.limits import (
    DAY,
    HOUR,
    ConcurrentPlansLimitError,
    LimitsConfig,
    PreemptionHistory,
)


def check_concurrent_plans(limits: LimitsConfig, history: PreemptionHistory) -> None:
    """Raise if no new plan may start now."""
    cap = limits.max_concurrent_plans
    active = history.active_plans()
    if cap is not None and active >= cap:
        raise ConcurrentPlansLimitError(
            f"{active} plan(s) already running, at most {cap} at once", cap, active + 1
        )


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
