"""The plan protocol end to end on FakeSlurm + SQLite (the course scenario).

Job 110 needs 3 NVLink GPUs; the planner requeues 104 on node01. Each test runs service
cycles (``Cycle.run``), with :func:`slurm_schedules` standing in for slurmctld starting the
target once it was handed over and its GPUs are free.
"""

from __future__ import annotations

import pytest

from service_helpers import CycleFactory, FakeClock, crash_at, slurm_schedules
from slurm_defrag.actuator.step_errors import SimulatedCrash
from slurm_defrag.domain.cluster import JobState
from slurm_defrag.domain.plan import Plan
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.policy.file import default_policy
from slurm_defrag.slurm.fake import FakeSlurm
from slurm_defrag.store.database import Store
from slurm_defrag.store.plans import Plans
from slurm_defrag.synth import course_scenario


def only_plan(store: Store) -> tuple[int, Plan]:
    (rec,) = Plans(store.engine).recent()
    return rec.id, Plan.model_validate(rec.inputs["plan"])


def run_until_closed(
    make_cycle: CycleFactory, fake: FakeSlurm, clock: FakeClock, store: Store, cycles: int = 6
) -> str:
    cycle = make_cycle()
    for _ in range(cycles):
        cycle.run()
        pid, plan = only_plan(store)
        slurm_schedules(fake, plan)
        clock.tick(60)
        if not Plans(store.engine).get(pid).open:
            break
    return Plans(store.engine).get(pid).status


def assert_served(fake: FakeSlurm, plan: Plan) -> None:
    """The course outcome: 110 on exactly the planned GPUs, 104 requeued, no reservation."""
    (target,) = plan.served
    (share,) = target.placements
    job = fake.jobs["110"]
    assert job["state"] == JobState.RUNNING
    assert job["gpus"] == {share.node: frozenset(share.gpus)}
    assert fake.jobs["104"]["state"] == JobState.PENDING
    assert [v.job_id for v in plan.victims] == ["104"]
    assert not [r for r in fake.reservations if r.startswith("defrag-")]
    assert not any(n["reason"].startswith("slurm-defrag") for n in fake.nodes.values())


def test_enforce_runs_every_step_and_records_it(
    make_cycle: CycleFactory, fake: FakeSlurm, clock: FakeClock, store: Store
) -> None:
    cycle = make_cycle()
    first = cycle.run()
    assert first.outcome == "planned"
    pid, plan = only_plan(store)
    plans = Plans(store.engine)
    # In flight: reserved, requeued, GPUs free, handed over; release waits for the start.
    states = [(s.action, s.state) for s in plans.steps(pid)]
    assert states == [
        ("reserve", "done"),
        ("requeue", "done"),
        ("wait-free", "done"),
        ("hand-over", "done"),
        ("release", "running"),
    ]
    assert plan.reservation in fake.reservations
    assert fake.reservations[plan.reservation].users == ("dave",)
    assert slurm_schedules(fake, plan)
    clock.tick(60)
    assert cycle.run().plans == {pid: "done"}
    assert_served(fake, plan)
    rec = plans.get(pid)
    assert rec.mode == "enforce"
    assert "requeued 104" in rec.note
    for s in plans.steps(pid):
        assert s.started_at is not None
        assert s.finished_at is not None
    cmds = plans.commands(plan_id=pid)
    assert [c.argv[:3] for c in cmds] == [
        ["scontrol", "create", "reservation"],
        ["scontrol", "requeue", "104"],
        ["scontrol", "update", "JobId=110"],
        ["scontrol", "update", "JobId=110"],
        ["scontrol", "delete", f"ReservationName={plan.reservation}"],
    ]
    assert all(c.exit_code == 0 and not c.dry_run and c.step_id for c in cmds)
    assert f"slurm-defrag:{plan.plan_id}" in cmds[1].argv[-1]
    # The next cycle has nothing left to do for 110.
    clock.tick(60)
    assert cycle.run().outcome == "idle"


def test_plan_is_the_planners_minimal_plan(make_cycle: CycleFactory, store: Store) -> None:
    make_cycle().run()
    _, stored = only_plan(store)
    direct = make_plan(course_scenario(), default_policy())
    assert stored.victims == direct.victims
    assert stored.targets == direct.targets


STEP_POINTS = [
    (k, ph)
    for k in ("reserve", "requeue", "wait-free", "hand-over", "release")
    for ph in ("acted", "recorded")
]


@pytest.mark.parametrize(("kind", "phase"), STEP_POINTS)
def test_crash_after_any_step_resumes_from_the_database(
    make_cycle: CycleFactory,
    fake: FakeSlurm,
    clock: FakeClock,
    store: Store,
    kind: str,
    phase: str,
) -> None:
    crashing = make_cycle(hook=crash_at(kind, phase))

    def run_until_crash() -> None:
        for _ in range(4):
            crashing.run()
            slurm_schedules(fake, only_plan(store)[1])
            clock.tick(60)

    with pytest.raises(SimulatedCrash):
        run_until_crash()
    # The process is gone; a new one (new executor, new lease handle) starts from the DB.
    assert run_until_closed(make_cycle, fake, clock, store) == "done"
    pid, plan = only_plan(store)
    assert_served(fake, plan)
    assert all(s.state == "done" for s in Plans(store.engine).steps(pid))


@pytest.mark.parametrize("kind", ["reserve", "requeue", "wait-free", "hand-over"])
def test_crash_then_ttl_rolls_back_cleanly(
    make_cycle: CycleFactory, fake: FakeSlurm, clock: FakeClock, store: Store, kind: str
) -> None:
    with pytest.raises(SimulatedCrash):
        make_cycle(hook=crash_at(kind, "acted")).run()
    clock.tick(3600)  # the service stayed down past the plan's TTL
    make_cycle().run()
    pid, plan = only_plan(store)
    rec = Plans(store.engine).get(pid)
    assert rec.status == "aborted"
    assert "TTL" in rec.note
    assert plan.reservation not in fake.reservations
    assert fake.jobs["110"]["state"] == JobState.PENDING
    undo = [s for s in Plans(store.engine).steps(pid) if s.action.startswith("undo-")]
    assert undo
    assert all(s.state == "done" for s in undo)


def test_ttl_rolls_back_when_the_target_never_starts(
    make_cycle: CycleFactory, fake: FakeSlurm, clock: FakeClock, store: Store
) -> None:
    cycle = make_cycle(ttl_s=300)
    cycle.run()  # in flight, waiting for 110 to start: we never let it
    clock.tick(301)
    report = cycle.run()
    pid, plan = only_plan(store)
    assert report.plans == {pid: "aborted"}
    assert plan.reservation not in fake.reservations
    # The target no longer points at the deleted reservation.
    assert ("update_job", "110", "ReservationName=") in fake.calls
    steps = Plans(store.engine).steps(pid)
    assert [(s.action, s.state) for s in steps][-3:] == [
        ("release", "failed"),
        ("undo-hand-over", "done"),
        ("undo-reserve", "done"),
    ]
    assert "TTL 300 s passed at step 5 release" in Plans(store.engine).get(pid).note


def test_crash_during_rollback_finishes_the_rollback(
    make_cycle: CycleFactory, fake: FakeSlurm, clock: FakeClock, store: Store
) -> None:
    make_cycle(ttl_s=300).run()
    clock.tick(301)
    with pytest.raises(SimulatedCrash):
        make_cycle(ttl_s=300, hook=crash_at("undo-hand-over", "acted")).run()
    pid, plan = only_plan(store)
    assert Plans(store.engine).get(pid).open
    make_cycle(ttl_s=300).run()
    assert Plans(store.engine).get(pid).status == "aborted"
    assert plan.reservation not in fake.reservations
