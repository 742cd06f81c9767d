"""Limits (typed errors, history, remaining budget), costs and the comment keys."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from slurm_defrag.actuator.limits import VictimRef, check_plan, check_requeue, plan_violations
from slurm_defrag.domain.cluster import Job, JobState
from slurm_defrag.planner.budget import Left, check_concurrent_plans, remaining_budget
from slurm_defrag.policy.comment_keys import last_checkpoint, parse_time
from slurm_defrag.policy.cost import CostConfig, victim_cost
from slurm_defrag.policy.limits import (
    ConcurrentPlansLimitError,
    GpuHoursForUserDayLimitError,
    GpuHoursPerPlanLimitError,
    GpuHoursPerUserDayLimitError,
    InMemoryPreemptionHistory,
    LimitsConfig,
    PreemptionHistory,
    PreemptionsPerHourLimitError,
    PreemptionsPerUserDayLimitError,
    RequeuesForUserDayLimitError,
    Usage,
    UserLimitError,
    VictimsPerPlanLimitError,
)
from slurm_defrag.synth import EPOCH

NOW = EPOCH


def history() -> InMemoryPreemptionHistory:
    h = InMemoryPreemptionHistory()
    h.record_requeue(NOW - timedelta(minutes=30), "a", "ann")
    h.record_requeue(NOW - timedelta(hours=5), "b", "ann")
    h.record_requeue(NOW - timedelta(days=2), "c", "bob")
    return h


def test_history_protocol_and_counts() -> None:
    h = history()
    assert isinstance(h, PreemptionHistory)
    assert h.preemptions_since(NOW - timedelta(hours=1)) == 1
    assert h.user_preemptions_since("ann", NOW - timedelta(days=1)) == 2
    assert h.user_preemptions_since("bob", NOW - timedelta(days=1)) == 0


@pytest.mark.parametrize(
    ("limits", "error"),
    [
        (LimitsConfig(max_victims_per_plan=1), VictimsPerPlanLimitError),
        (LimitsConfig(max_gpu_hours_lost_per_plan=2.5), GpuHoursPerPlanLimitError),
        (LimitsConfig(max_preemptions_per_hour=2), PreemptionsPerHourLimitError),
        (LimitsConfig(max_preemptions_per_user_per_day=2), PreemptionsPerUserDayLimitError),
    ],
)
def test_each_limit_has_its_error(limits: LimitsConfig, error: type[Exception]) -> None:
    victims = [VictimRef("1", "ann", 2.0), VictimRef("2", "cid", 1.0)]
    with pytest.raises(error) as e:
        check_plan(victims, limits, history(), NOW)
    assert "limits." in str(e.value)


def test_no_limits_no_violations() -> None:
    # Every limit null (the per-user ones have defaults since issue #40's fairness limits).
    many = [VictimRef("1", "ann", 99, ("bob",))] * 50
    assert plan_violations(many, NONE, history(), NOW) == []


def test_check_requeue_counts_done_ones() -> None:
    lim = LimitsConfig(max_victims_per_plan=2)
    check_requeue(VictimRef("2", "x", 0), [VictimRef("1", "x", 0)], lim, history(), NOW)
    with pytest.raises(VictimsPerPlanLimitError):
        check_requeue(VictimRef("3", "x", 0), [VictimRef("1", "x", 0)] * 2, lim, history(), NOW)


def test_concurrent_plans() -> None:
    h = InMemoryPreemptionHistory()
    check_concurrent_plans(LimitsConfig(), h)
    h.start_plan("p1")
    with pytest.raises(ConcurrentPlansLimitError):
        check_concurrent_plans(LimitsConfig(), h)
    h.finish_plan("p1")
    check_concurrent_plans(LimitsConfig(), h)


def test_remaining_budget() -> None:
    lim = LimitsConfig(
        max_victims_per_plan=5,
        max_preemptions_per_hour=3,
        max_preemptions_per_user_per_day=2,
        max_gpu_hours_lost_per_plan=10,
    )
    b = remaining_budget(lim, history(), NOW, ["ann", "bob"])
    assert b.victims == 2
    assert b.gpu_hours == 10
    assert b.per_user == {"ann": 0, "bob": 2}


NONE = LimitsConfig.model_validate(dict.fromkeys(LimitsConfig.model_fields))
"""Every limit off: each test below switches on the ones it is about."""


def fair_history() -> InMemoryPreemptionHistory:
    """Today: bob's jobs requeued twice for ann's targets (3 + 2 GPU-hours), cid's once
    for ann's and dee's (1 GPU-hour), ann's own job once for herself; two days ago, many
    for ann (outside any 24 h window)."""
    h = InMemoryPreemptionHistory()
    h.record_requeue(NOW - timedelta(hours=2), "b1", "bob", 3.0, ["ann"])
    h.record_requeue(NOW - timedelta(hours=20), "b2", "bob", 2.0, ["ann"])
    h.record_requeue(NOW - timedelta(hours=1), "c1", "cid", 1.0, ["ann", "dee"])
    h.record_requeue(NOW - timedelta(hours=1), "a1", "ann", 7.0, ["ann"])
    for i in range(10):
        h.record_requeue(NOW - timedelta(days=2), f"old{i}", "bob", 10.0, ["ann"])
    return h


def test_history_counts_both_sides_of_a_users_day() -> None:
    h = fair_history()
    day = NOW - timedelta(days=1)
    assert h.victim_usage("bob", day) == Usage(2, 5.0)
    assert h.victim_usage("ann", day) == Usage(1, 7.0)
    # for ann: bob's two and cid's one; her own job is never "for" her
    assert h.beneficiary_usage("ann", day) == Usage(3, 6.0)
    assert h.beneficiary_usage("dee", day) == Usage(1, 1.0)
    assert h.beneficiary_usage("bob", day) == Usage()
    assert h.user_preemptions_since("bob", day) == 2
    # every user at once (the planner's one read per cycle): the same figures
    every = h.usage_by_user(day)
    for user in ("ann", "bob", "cid", "dee", "zed"):
        assert every.of(user) == h.victim_usage(user, day)
        assert every.for_(user) == h.beneficiary_usage(user, day)


@pytest.mark.parametrize(
    ("limits", "error", "user"),
    [
        # bob: 2 today + 1 in the plan = 3 requeues; 5 + 4 = 9 GPU-hours
        ({"max_preemptions_per_user_per_day": 2}, PreemptionsPerUserDayLimitError, "bob"),
        ({"max_gpu_hours_lost_per_user_per_day": 8.5}, GpuHoursPerUserDayLimitError, "bob"),
        # ann: 3 today + 2 in the plan (bob's and eve's; her own 5th job is hers) = 5;
        # 6 + 4 + 0.5 = 10.5 GPU-hours
        ({"max_requeues_for_user_per_day": 4}, RequeuesForUserDayLimitError, "ann"),
        ({"max_gpu_hours_lost_for_user_per_day": 10}, GpuHoursForUserDayLimitError, "ann"),
    ],
)
def test_each_per_user_limit_has_its_error(
    limits: dict[str, float], error: type[UserLimitError], user: str
) -> None:
    plan = [
        VictimRef("9", "bob", 4.0, ("ann",)),
        VictimRef("10", "eve", 0.5, ("ann",)),
        VictimRef("11", "ann", 0.5, ()),
    ]
    lim = NONE.model_copy(update=limits)
    (broken,) = plan_violations(plan, lim, fair_history(), NOW)
    assert isinstance(broken, error)
    assert broken.user == user
    assert f"user {user}" in str(broken)
    assert str(broken).startswith(f"limits.{error.limit}: ")
    # one requeue less and it fits
    (value,) = limits.values()
    bigger = NONE.model_copy(update={k: v + 1 for k, v in limits.items()})
    assert plan_violations(plan, bigger, fair_history(), NOW) == [], value


def test_the_executor_recheck_counts_what_moved_since_the_plan() -> None:
    """check_requeue before one requeue: another plan for ann's targets ran meanwhile."""
    lim = NONE.model_copy(update={"max_requeues_for_user_per_day": 4})
    h = fair_history()
    victim = VictimRef("9", "bob", 1.0, ("ann",))
    check_requeue(victim, [], lim, h, NOW)  # 3 today + this one
    h.record_requeue(NOW, "x", "cid", 1.0, ["ann"])
    with pytest.raises(RequeuesForUserDayLimitError):
        check_requeue(victim, [], lim, h, NOW)
    # a requeue of her own job is not "for" her
    check_requeue(VictimRef("12", "ann", 1.0, ()), [], lim, h, NOW)
    # the window slides: a day later the budget is back
    check_requeue(victim, [], lim, h, NOW + timedelta(days=1, minutes=1))


def test_remaining_budget_per_user_both_sides() -> None:
    lim = NONE.model_copy(
        update={
            "max_preemptions_per_user_per_day": 3,
            "max_gpu_hours_lost_per_user_per_day": 6.0,
            "max_requeues_for_user_per_day": 2,
            "max_gpu_hours_lost_for_user_per_day": 10.0,
        }
    )
    b = remaining_budget(lim, fair_history(), NOW, ["bob", "cid"], ["ann", "dee", "fay"])
    assert b.per_user == {"bob": 1, "cid": 2}
    assert b.per_user_lost == {"bob": 1.0, "cid": 5.0}
    assert b.for_user == {"ann": Left(0, 4.0), "dee": Left(1, 9.0), "fay": Left(2, 10.0)}
    off = remaining_budget(NONE, fair_history(), NOW, ["bob"], ["ann"])
    assert (off.per_user, off.per_user_lost, off.for_user) == ({}, {}, {})


def test_parse_time() -> None:
    assert parse_time("1764417600") == datetime(2025, 11, 29, 12, 0, tzinfo=UTC)
    assert parse_time("2026-11-29T11:00:00") == datetime(2026, 11, 29, 11, 0, tzinfo=UTC)
    assert parse_time("yesterday") is None


def _job(**kw: object) -> Job:
    base: dict[str, object] = {
        "id": "1",
        "state": JobState.RUNNING,
        "qos": "low",
        "partition": "p",
        "start_time": NOW - timedelta(hours=3),
        "gpus": {"n": frozenset({0, 1})},
    }
    base.update(kw)
    return Job.model_validate(base)


def test_cost_from_start_and_from_checkpoint() -> None:
    cfg = CostConfig(
        restart_cost_gpu_hours=0.5, qos_weights={"low": 0.5}, partition_weights={"p": 2.0}
    )
    c = victim_cost(_job(), NOW, cfg)
    assert c.lost_gpu_hours == pytest.approx(6.0)
    assert c.since_source == "start"
    assert c.cost == pytest.approx(6.0 * 0.5 * 2.0 + 0.5)
    j = _job(comment="defrag:ckpt=2026-11-29T11:00:00Z")
    assert last_checkpoint(j) == NOW - timedelta(hours=1)
    c = victim_cost(j, NOW, cfg)
    assert c.lost_gpu_hours == pytest.approx(2.0)
    assert c.since_source == "checkpoint"
    # a checkpoint before the start (a previous run's) does not count
    old = _job(comment="defrag:ckpt=2026-11-28T00:00:00Z")
    assert victim_cost(old, NOW, cfg).since_source == "start"
