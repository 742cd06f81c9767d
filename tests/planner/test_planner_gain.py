"""A plan must be worth the wait it saves its target (``cost.target_wait_weight``).

slurmctld's backfill already plans a start for a blocked job (a pending job's StartTime);
requeueing others to start it only pays when their cost is below the wait it saves.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from builders import busy, node, pending, running, snapshot
from slurm_defrag.domain.cluster import ClusterSnapshot, Job
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.policy.cost import wait_saved_hours
from slurm_defrag.policy.file import parse_policy
from slurm_defrag.synth import EPOCH

GAIN = {"version": 1, "cost": {"target_wait_weight": 1.0}}


def _snapshot(limit_left_h: float, planned_in_h: float | None) -> ClusterSnapshot:
    # g1: 3 GPUs held for 2 h, 6 GPU-h lost (+ 0.1 restart) if requeued; 3 more held for
    # 5 h by a dearer job that does not end soon; 2 free; target: 4 NVLinked (the free 2
    # and 2 of the cheap job's: a job holding 4 or more is never requeued for it)
    blocker = running("1", {"g1": range(3)}).model_copy(
        update={
            "start_time": EPOCH - timedelta(hours=2),
            "time_limit_s": int((2 + limit_left_h) * 3600),
        }
    )
    dearer = running("3", {"g1": range(3, 6)}).model_copy(
        update={"start_time": EPOCH - timedelta(hours=5), "time_limit_s": 48 * 3600}
    )
    planned = None if planned_in_h is None else EPOCH + timedelta(hours=planned_in_h)
    target = pending("2", 4, nvlink=True).model_copy(update={"planned_start": planned})
    return snapshot([node("g1")], [blocker, dearer, target])


@pytest.mark.parametrize(
    ("planned_in_h", "served"),
    [
        (None, True),  # no plan known: up to cost.max_wait_hours saved (4 GPUs x 24 h)
        (2.0, True),  # 8 GPU-h saved > 6.1 lost
        (1.0, False),  # 4 GPU-h saved < 6.1 lost: Slurm's own plan is the better deal
        (-0.5, False),  # planned start already passed: "any moment now"
    ],
)
def test_requeue_only_when_the_wait_saved_exceeds_its_cost(
    planned_in_h: float | None, served: bool
) -> None:
    plan = make_plan(_snapshot(5.0, planned_in_h), parse_policy(GAIN), ["2"])
    (t,) = plan.targets
    assert t.served is served
    assert [v.job_id for v in plan.victims] == (["1"] if served else [])
    if not served:  # the operator reads why, not "went to higher-value targets"
        assert "not worth it: Slurm plans to start it at" in t.explanation
        assert "its cheapest placement costs more: g1: requeue 1" in t.explanation


def test_without_the_weight_the_targets_wait_is_not_looked_at() -> None:
    plan = make_plan(_snapshot(5.0, 0.1), parse_policy({"version": 1}), ["2"])
    assert plan.targets[0].served
    assert [v.job_id for v in plan.victims] == ["1"]


@pytest.mark.parametrize(("planned_in_h", "served"), [(1.0, True), (0.25, False)])
def test_a_drain_must_start_the_target_before_slurms_plan(
    planned_in_h: float, served: bool
) -> None:
    # blockers end in 0.5 h: drain for them unless Slurm starts the target sooner anyway
    plan = make_plan(_snapshot(0.5, planned_in_h), parse_policy(GAIN), ["2"])
    (t,) = plan.targets
    assert t.served is served
    assert not plan.victims
    if served:
        assert t.mode == "drain"
    else:
        assert t.explanation.endswith("drains for 0.50 h, no sooner")


def test_wait_saved_hours() -> None:
    job = _snapshot(1.0, 3.0).job_by_id["2"]
    assert wait_saved_hours(job, EPOCH, 24.0) == pytest.approx(3.0)
    assert wait_saved_hours(job, EPOCH, 2.0) == 2.0
    assert wait_saved_hours(job, EPOCH + timedelta(hours=4), 24.0) == 0.0
    unplanned = job.model_copy(update={"planned_start": None})
    assert wait_saved_hours(unplanned, EPOCH, 24.0) == 24.0


def test_planned_start_round_trips_and_is_left_out_when_unknown() -> None:
    snap = _snapshot(1.0, 3.0)
    job = snap.job_by_id["2"]
    assert Job.model_validate_json(job.model_dump_json()) == job
    unplanned = job.model_copy(update={"planned_start": None})
    assert "planned_start" not in unplanned.model_dump()  # older bodies stay byte-identical


def test_fingerprint_sees_a_moved_plan_only_when_it_is_weighed() -> None:
    from slurm_defrag.planner.fingerprint import plan_inputs_fingerprint
    from slurm_defrag.policy.limits import InMemoryPreemptionHistory

    def fp(planned_in_h: float, policy: dict[str, object]) -> str:
        snap = _snapshot(5.0, planned_in_h)
        # 2 + 2 free GPUs on two nodes: the strategies see a falsely starved target
        snap = snapshot([*snap.nodes, node("g2")], [*snap.jobs, busy("g2", range(6))])
        return plan_inputs_fingerprint(
            snap, parse_policy(policy), InMemoryPreemptionHistory(), EPOCH
        )[0]

    assert fp(1.0, GAIN) != fp(3.0, GAIN)  # the cached verdict would be stale
    plain = {"version": 1}
    assert fp(1.0, plain) == fp(3.0, plain)  # backfill's re-estimates: no re-plan
