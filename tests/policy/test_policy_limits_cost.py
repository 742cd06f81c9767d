"""Limits (typed errors, history, remaining budget), costs and the comment keys."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from slurm_defrag.actuator.limits import VictimRef, check_plan, check_requeue, plan_violations
from slurm_defrag.domain.cluster import Job, JobState
from slurm_defrag.planner.budget import check_concurrent_plans, remaining_budget
from slurm_defrag.policy.comment_keys import last_checkpoint, parse_time
from slurm_defrag.policy.cost import CostConfig, victim_cost
from slurm_defrag.policy.limits import (
    ConcurrentPlansLimitError,
    GpuHoursPerPlanLimitError,
    InMemoryPreemptionHistory,
    LimitsConfig,
    PreemptionHistory,
    PreemptionsPerHourLimitError,
    PreemptionsPerUserDayLimitError,
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
    none = LimitsConfig(max_victims_per_plan=None, max_concurrent_plans=None)
    assert plan_violations([VictimRef("1", "ann", 99)] * 50, none, history(), NOW) == []


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
