"""A steady cycle does not re-plan when nothing that matters changed (issue #16).

Defect: every cycle ran the planner, even on an unchanged cluster (1.5 s per cycle on
1,000 nodes). Now the cycle keeps a fingerprint of the planner's inputs (targets, their
candidate nodes and the jobs on them, protections, policy, limit budget) and re-plans only
when it changes, or when the last plan is older than ``replan_after_s``.
"""

from __future__ import annotations

from unittest import mock

from service_helpers import CycleFactory, FakeClock
from slurm_defrag.service import loop
from slurm_defrag.slurm.fake import FakeSlurm


def _counting() -> tuple[mock.MagicMock, object]:
    real = loop.make_plan
    spy = mock.MagicMock(side_effect=real)
    return spy, mock.patch.object(loop, "make_plan", spy)


def test_unchanged_dry_run_cycle_does_not_replan(
    make_cycle: CycleFactory, clock: FakeClock
) -> None:
    cycle = make_cycle("dry-run")
    spy, patch = _counting()
    with patch:  # type: ignore[attr-defined]
        first = cycle.run()
        clock.tick(60)
        second = cycle.run()
    assert first.outcome == "planned"
    assert second.outcome == "unchanged"
    assert "not re-planned" in second.detail
    assert spy.call_count == 1


def test_replans_after_the_maximum_age(make_cycle: CycleFactory, clock: FakeClock) -> None:
    cycle = make_cycle("dry-run")
    spy, patch = _counting()
    with patch:  # type: ignore[attr-defined]
        cycle.run()
        clock.tick(cycle.replan_after_s + 1)
        cycle.run()
    assert spy.call_count == 2


def test_a_changed_job_on_a_candidate_node_replans(
    make_cycle: CycleFactory, clock: FakeClock, fake: FakeSlurm
) -> None:
    cycle = make_cycle("dry-run")
    spy, patch = _counting()
    with patch:  # type: ignore[attr-defined]
        cycle.run()
        clock.tick(60)
        fake.update_job("104", AdminComment="defrag:protect")  # an admin protects it
        cycle.run()
    assert spy.call_count == 2


def test_a_changed_policy_replans(make_cycle: CycleFactory, clock: FakeClock) -> None:
    from slurm_defrag.policy.file import parse_policy

    spy, patch = _counting()
    with patch:  # type: ignore[attr-defined]
        make_cycle("dry-run").run()
        cycle = make_cycle(
            "dry-run", policy=parse_policy({"version": 1, "limits": {"max_victims_per_plan": 3}})
        )
        cycle.run()  # a new instance plans once
        clock.tick(60)
        cycle.run()
    assert spy.call_count == 2


def test_fingerprint_ignores_time_but_not_protections() -> None:
    """min-runtime protection ends with time: the same snapshot later is another input."""
    from datetime import timedelta

    from slurm_defrag.planner.fingerprint import plan_inputs_fingerprint
    from slurm_defrag.policy.file import default_policy
    from slurm_defrag.policy.limits import InMemoryPreemptionHistory
    from slurm_defrag.synth import course_scenario

    snap, policy, hist = course_scenario(), default_policy(), InMemoryPreemptionHistory()
    now = snap.taken_at
    a = plan_inputs_fingerprint(snap, policy, hist, now)[0]
    assert a == plan_inputs_fingerprint(snap, policy, hist, now + timedelta(seconds=30))[0]
    job = next(j for j in snap.jobs if j.start_time is not None and j.gpus)
    assert job.start_time is not None
    young = plan_inputs_fingerprint(snap, policy, hist, job.start_time + timedelta(minutes=5))[0]
    old = plan_inputs_fingerprint(snap, policy, hist, job.start_time + timedelta(minutes=11))[0]
    assert young != old  # min-runtime (10 min) protects the job at +5 min, not at +11
