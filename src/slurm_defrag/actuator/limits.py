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

from slurm_defrag.policy.limits import (
    DAY,
    HOUR,
    GpuHoursPerPlanLimitError,
    LimitError,
    LimitsConfig,
    PreemptionHistory,
    PreemptionsPerHourLimitError,
    PreemptionsPerUserDayLimitError,
    VictimsPerPlanLimitError,
)


@dataclass(frozen=True, slots=True)
class VictimRef:
    """What the limits need to know about one requeue."""

    job_id: str
    user: str
    lost_gpu_hours: float


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
            out.append(
                PreemptionsPerHourLimitError(
                    f"{total} requeues in the last hour with this plan, at most {ph}", ph, total
                )
            )
    if (pu := limits.max_preemptions_per_user_per_day) is not None:
        per_user: dict[str, int] = {}
        for v in victims:
            per_user[v.user] = per_user.get(v.user, 0) + 1
        for user, k in sorted(per_user.items()):
            total = history.user_preemptions_since(user, now - DAY) + k
            if total > pu:
                out.append(
                    PreemptionsPerUserDayLimitError(
                        f"user {user}: {total} requeues in 24 h with this plan, at most {pu}",
                        pu,
                        total,
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
