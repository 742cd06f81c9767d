"""The limits enforced where the action happens (descheduler's evictor keeps its limits).

The executor calls :func:`check_plan` when it admits a plan and :func:`check_requeue` right
before each requeue: the planner already respected the limits
(:mod:`slurm_defrag.planner.budget`), but other plans may have requeued since. The limits'
data and error types are :mod:`slurm_defrag.policy.limits`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from slurm_defrag.domain.plan import Plan
from slurm_defrag.policy.limits import (
    DAY,
    HOUR,
    GpuHoursForUserDayLimitError,
    GpuHoursPerPlanLimitError,
    GpuHoursPerUserDayLimitError,
    LimitError,
    LimitsConfig,
    PreemptionHistory,
    PreemptionsPerHourLimitError,
    PreemptionsPerUserDayLimitError,
    RequeuesForUserDayLimitError,
    UserUsage,
    VictimsPerPlanLimitError,
)

_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class VictimRef:
    """What the limits need to know about one requeue."""

    job_id: str
    user: str
    lost_gpu_hours: float
    for_users: tuple[str, ...] = ()
    """Users whose pending jobs the requeue frees GPUs for, the victim's own user left
    out: whose beneficiary budget it spends (:func:`beneficiaries`)."""


def beneficiaries(plan: Plan, job_id: str, victim_user: str) -> tuple[str, ...]:
    """The users whose targets in ``plan`` the requeue of ``job_id`` serves, other than
    the victim's own ``victim_user`` (sorted)."""
    users = {t.job_id: t.user for t in plan.targets}
    victim = next((v for v in plan.victims if v.job_id == job_id), None)
    served = victim.for_targets if victim is not None else ()
    return tuple(sorted({users[t] for t in served if t in users} - {victim_user}))


def victim_refs(plan: Plan) -> list[VictimRef]:
    """The plan's requeues as the limits see them."""
    return [
        VictimRef(v.job_id, v.user, v.lost_gpu_hours, beneficiaries(plan, v.job_id, v.user))
        for v in plan.victims
    ]


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
    if (gh := limits.max_gpu_hours_lost_per_plan) is not None and lost > gh + _EPS:
        out.append(
            GpuHoursPerPlanLimitError(f"{lost:.2f} GPU-hours lost, at most {gh:g}", gh, lost)
        )
    if (ph := limits.max_preemptions_per_hour) is not None:
        total = history.preemptions_since(now - HOUR) + n
        if total > ph:
            out.append(
                PreemptionsPerHourLimitError(
                    f"{total} requeues in the last hour with this plan, at most {ph}", ph, total
                )
            )
    per_user = (
        limits.max_preemptions_per_user_per_day,
        limits.max_gpu_hours_lost_per_user_per_day,
        limits.max_requeues_for_user_per_day,
        limits.max_gpu_hours_lost_for_user_per_day,
    )
    if victims and any(x is not None for x in per_user):
        # what this plan adds, per user, on both sides; the past from one read
        plan = UserUsage.count((v.user, v.lost_gpu_hours, v.for_users) for v in victims)
        past = history.usage_by_user(now - DAY)
        out += _per_user(plan, past, limits)
        out += _for_user(plan, past, limits)
    return out


def _per_user(plan: UserUsage, history: UserUsage, limits: LimitsConfig) -> list[LimitError]:
    """Victim side: each user's requeued jobs in 24 h, count and GPU-hours lost."""
    count, hours = (
        limits.max_preemptions_per_user_per_day,
        limits.max_gpu_hours_lost_per_user_per_day,
    )
    if count is None and hours is None:
        return []
    out: list[LimitError] = []
    for user, k in sorted(plan.victim.items()):
        past = history.of(user)
        n, lost = past.requeues + k.requeues, past.gpu_hours + k.gpu_hours
        if count is not None and n > count:
            out.append(
                PreemptionsPerUserDayLimitError(
                    f"user {user}: {n} requeues of their jobs in 24 h with this plan, "
                    f"at most {count}",
                    count,
                    n,
                    user,
                )
            )
        if hours is not None and lost > hours + _EPS:
            out.append(
                GpuHoursPerUserDayLimitError(
                    f"user {user}: their requeued jobs lose {lost:.2f} GPU-hours in 24 h "
                    f"with this plan, at most {hours:g}",
                    hours,
                    lost,
                    user,
                )
            )
    return out


def _for_user(plan: UserUsage, history: UserUsage, limits: LimitsConfig) -> list[LimitError]:
    """Beneficiary side: requeues of others' jobs done for each user's targets in 24 h."""
    count, hours = limits.max_requeues_for_user_per_day, limits.max_gpu_hours_lost_for_user_per_day
    if count is None and hours is None:
        return []
    out: list[LimitError] = []
    for user, k in sorted(plan.beneficiary.items()):
        past = history.for_(user)
        n, lost = past.requeues + k.requeues, past.gpu_hours + k.gpu_hours
        if count is not None and n > count:
            out.append(
                RequeuesForUserDayLimitError(
                    f"user {user}: {n} requeues of other users' jobs for their pending jobs "
                    f"in 24 h with this plan, at most {count}",
                    count,
                    n,
                    user,
                )
            )
        if hours is not None and lost > hours + _EPS:
            out.append(
                GpuHoursForUserDayLimitError(
                    f"user {user}: requeues for their pending jobs lose {lost:.2f} GPU-hours "
                    f"of other users' work in 24 h with this plan, at most {hours:g}",
                    hours,
                    lost,
                    user,
                )
            )
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
