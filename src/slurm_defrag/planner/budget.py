"""What a new plan may still spend: the limits and the history turned into solver caps.

Per user from both sides: what their jobs may still lose as victims, and what requeues
of other users' jobs for their pending jobs may still spend (the beneficiary side; the
model attributes a victim to every target user whose block it frees, docs/planner.md
"Fairness per user").

The planner's reading of :mod:`slurm_defrag.policy.limits`; the executor enforces the same
limits again right before acting (:mod:`slurm_defrag.actuator.limits`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
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
class Left:
    """What one user may still spend today (None: no cap)."""

    requeues: int | None = None
    gpu_hours: float | None = None


@dataclass(frozen=True, slots=True)
class Budget:
    """What one new plan may still spend, from the limits and the history (None = no cap)."""

    victims: int | None
    gpu_hours: float | None
    per_user: dict[str, int]
    """Remaining requeues per user, for the users asked about (absent = no cap)."""
    per_user_lost: dict[str, float] = field(default_factory=dict)
    """Remaining GPU-hours one user's requeued jobs may lose (absent = no cap)."""
    for_user: dict[str, Left] = field(default_factory=dict)
    """Per target user: what requeues of other users' jobs for their targets may still
    spend (absent = no cap)."""


def remaining_budget(
    limits: LimitsConfig,
    history: PreemptionHistory,
    now: datetime,
    users: Iterable[str],
    target_users: Iterable[str] = (),
) -> Budget:
    """Turn limits and history into caps for the plan being made (never negative).

    ``users``: the candidate victims' users; ``target_users``: the targets' users."""
    caps: list[int] = []
    if limits.max_victims_per_plan is not None:
        caps.append(limits.max_victims_per_plan)
    if limits.max_preemptions_per_hour is not None:
        caps.append(max(0, limits.max_preemptions_per_hour - history.preemptions_since(now - HOUR)))
    pu, pl = limits.max_preemptions_per_user_per_day, limits.max_gpu_hours_lost_per_user_per_day
    fc, fl = limits.max_requeues_for_user_per_day, limits.max_gpu_hours_lost_for_user_per_day
    per_user: dict[str, int] = {}
    per_user_lost: dict[str, float] = {}
    for_user: dict[str, Left] = {}
    if all(x is None for x in (pu, pl, fc, fl)):
        return Budget(min(caps) if caps else None, limits.max_gpu_hours_lost_per_plan, {})
    usage = history.usage_by_user(now - DAY)  # one read for every user
    if pu is not None or pl is not None:
        for u in sorted(set(users)):
            used = usage.of(u)
            if pu is not None:
                per_user[u] = max(0, pu - used.requeues)
            if pl is not None:
                per_user_lost[u] = max(0.0, pl - used.gpu_hours)
    if fc is not None or fl is not None:
        for u in sorted(set(target_users)):
            used = usage.for_(u)
            for_user[u] = Left(
                None if fc is None else max(0, fc - used.requeues),
                None if fl is None else max(0.0, fl - used.gpu_hours),
            )
    return Budget(
        victims=min(caps) if caps else None,
        gpu_hours=limits.max_gpu_hours_lost_per_plan,
        per_user=per_user,
        per_user_lost=per_user_lost,
        for_user=for_user,
    )
