"""Safety on FakeSlurm + SQLite: dry-run, protections on a fresh read, limits (the per-user
ones re-checked on the store's history right before each requeue), kill switch, the lease,
Slurm unreachable."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from service_helpers import CycleFactory, FakeClock, slurm_schedules
from slurm_defrag.actuator.audit import AuditingWriter
from slurm_defrag.actuator.executor import Channel, Executor, Safety
from slurm_defrag.domain.cluster import ClusterSnapshot, JobState
from slurm_defrag.domain.plan import Plan
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.policy.file import default_policy, parse_policy
from slurm_defrag.policy.limits import InMemoryPreemptionHistory
from slurm_defrag.service.preemption_history import StoreHistory
from slurm_defrag.slurm.failures import SlurmUnavailableError
from slurm_defrag.slurm.fake import FakeSlurm
from slurm_defrag.store.database import Store
from slurm_defrag.store.plans import NewStep, Plans, users_field
from slurm_defrag.synth import course_scenario


def test_dry_run_stores_the_same_plan_and_changes_nothing(
    make_cycle: CycleFactory, fake: FakeSlurm, store: Store
) -> None:
    before = fake.snapshot()
    report = make_cycle("dry-run").run()
    assert report.outcome == "planned"
    assert fake.calls == []
    assert fake.snapshot() == before
    (rec,) = Plans(store.engine).recent()
    assert rec.mode == "dry-run"
    assert rec.status == "done"
    assert "nothing changed in Slurm" in rec.note
    stored = Plan.model_validate(rec.inputs["plan"])
    direct = make_plan(course_scenario(), default_policy())
    assert (stored.victims, stored.targets, stored.actions) == (
        direct.victims,
        direct.targets,
        direct.actions,
    )
    # Same path as enforce: same steps and commands, recorded as dry-run.
    cmds = Plans(store.engine).commands(plan_id=rec.id)
    assert [c.argv[1] for c in cmds] == ["create", "requeue", "update"]
    assert all(c.dry_run for c in cmds)
    # An unchanged cluster does not store the same dry-run plan every cycle.
    assert make_cycle("dry-run").run().outcome == "idle"
    assert len(Plans(store.engine).recent()) == 1


def test_dry_run_speaks_conditionally_and_stores_nothing_as_executed(
    make_cycle: CycleFactory, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="slurm_defrag"):
        assert make_cycle("dry-run").run().outcome == "planned"
    said = "\n".join(r.getMessage() for r in caplog.records)
    assert "would create reservation defrag-" in said
    assert "would requeue job 104" in said
    assert "(dry-run, not executed)" in said
    assert " done:" not in said  # nothing reads as done
    assert "requeued job" not in said
    (rec,) = Plans(store.engine).recent()
    assert rec.note.startswith("dry-run, not executed:")
    assert rec.holder == "test:1"  # the instance that ran it (its lease holder id)
    cmds = Plans(store.engine).commands(plan_id=rec.id)
    assert cmds
    assert all(not c.executed and c.exit_code is None for c in cmds)
    assert {c.outcome for c in cmds} == {"not executed (dry-run)"}


def test_enforce_speaks_of_what_was_done(
    make_cycle: CycleFactory, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="slurm_defrag"):
        make_cycle("enforce").run()
    said = "\n".join(r.getMessage() for r in caplog.records)
    assert "step 1 reserve done: created reservation defrag-" in said
    assert "step 2 requeue done: requeued job 104" in said
    assert "would " not in said
    (rec,) = Plans(store.engine).recent()
    assert rec.holder == "test:1"
    cmds = Plans(store.engine).commands(plan_id=rec.id)
    assert cmds
    assert all(c.executed and c.exit_code == 0 for c in cmds)
    assert {c.outcome for c in cmds} == {"0"}


def _admitted(
    store: Store, fake: FakeSlurm, clock: FakeClock, policy_text: dict[str, object] | None = None
) -> tuple[Executor, int]:
    policy = parse_policy({"version": 1, **(policy_text or {})})
    plans = Plans(store.engine)
    ex = Executor(
        Channel(fake, AuditingWriter(fake, plans, dry_run=False), plans, "enforce"),
        Safety(policy, 900, InMemoryPreemptionHistory()),
        clock=clock,
    )
    pid = ex.admit(make_plan(fake.snapshot(), default_policy()))
    assert pid is not None or policy_text
    return ex, pid or 0


def _set_job(fake: FakeSlurm, job_id: str, **fields: object) -> None:
    fake.jobs[job_id].update(fields)


def test_requeue_0_seen_on_the_fresh_read_stops_and_rolls_back(
    store: Store, fake: FakeSlurm, clock: FakeClock
) -> None:
    ex, pid = _admitted(store, fake, clock)
    _set_job(fake, "104", requeue=False)  # changed after the plan was made
    assert ex.advance(pid) == "aborted"
    assert fake.jobs["104"]["state"] == JobState.RUNNING
    assert not any(c[0] == "requeue" for c in fake.calls)
    assert not [r for r in fake.reservations if r.startswith("defrag-")]
    note = Plans(store.engine).get(pid).note
    assert "job 104 is protected now: Requeue=0" in note


def _target(store: Store, pid: int) -> str:
    plan = Plan.model_validate(Plans(store.engine).get(pid).inputs["plan"])
    (served,) = plan.served
    return served.job_id


@pytest.mark.parametrize("reason", ["JobHeldUser", "JobHeldAdmin"])
def test_a_target_held_before_the_requeue_ends_the_plan_unharmed(
    store: Store, fake: FakeSlurm, clock: FakeClock, reason: str
) -> None:
    """#40: the owner holds the target right after the reservation is made: nobody is
    requeued for it and the block is released at once (not at the end of the TTL)."""
    ex, pid = _admitted(store, fake, clock)
    _set_job(fake, _target(store, pid), reason=reason)
    assert ex.advance(pid) == "aborted"
    assert not any(c[0] == "requeue" for c in fake.calls)
    assert fake.jobs["104"]["state"] == JobState.RUNNING
    assert not [r for r in fake.reservations if r.startswith("defrag-")]
    assert f"is held ({reason})" in Plans(store.engine).get(pid).note


def test_a_target_held_after_the_hand_over_releases_the_block(
    store: Store, fake: FakeSlurm, clock: FakeClock
) -> None:
    ex, pid = _admitted(store, fake, clock)
    target = _target(store, pid)
    assert ex.advance(pid) == "applying"  # handed over, waiting for Slurm to start it
    handed = [c for c in fake.calls if c[:2] == ("update_job", target)]
    assert [c[2].startswith("ReservationName=defrag-") for c in handed] == [True]
    _set_job(fake, target, reason="JobHeldUser")
    assert ex.advance(pid) == "aborted"
    assert not [r for r in fake.reservations if r.startswith("defrag-")]
    # no longer tied to a reservation that is gone
    assert ("update_job", target, "ReservationName=") in fake.calls


def test_protection_from_the_policy_is_rechecked(
    store: Store, fake: FakeSlurm, clock: FakeClock
) -> None:
    # The plan was made under the default policy; the executor's policy protects QOS prod
    # and the victim's QOS is prod on the fresh read.
    ex, pid = _admitted(store, fake, clock, {"protections": {"qos": ["prod"]}})
    _set_job(fake, "104", qos="prod")
    assert ex.advance(pid) == "aborted"
    assert "QOS=prod" in Plans(store.engine).get(pid).note
    assert fake.jobs["104"]["state"] == JobState.RUNNING


def test_limits_are_enforced_by_the_executor(
    store: Store, fake: FakeSlurm, clock: FakeClock
) -> None:
    _, pid = _admitted(store, fake, clock, {"limits": {"max_victims_per_plan": 0}})
    assert pid == 0  # refused at admission
    (rec,) = Plans(store.engine).recent()
    assert rec.status == "aborted"
    assert "max_victims_per_plan" in rec.note
    assert fake.calls == []


def test_kill_switch_file_stops_all_action_within_one_cycle(
    make_cycle: CycleFactory,
    fake: FakeSlurm,
    clock: FakeClock,
    store: Store,
    tmp_path: Path,
) -> None:
    cycle = make_cycle()
    cycle.run()  # a plan in flight, waiting for 110 to start
    calls = len(fake.calls)
    (tmp_path / "STOP").touch()
    (rec,) = Plans(store.engine).recent()
    slurm_schedules(fake, Plan.model_validate(rec.inputs["plan"]))
    clock.tick(60)
    report = cycle.run()
    assert report.outcome == "off"
    assert "kill switch" in report.detail
    assert len(fake.calls) == calls  # not even the release of the started job
    assert Plans(store.engine).get(rec.id).open
    (tmp_path / "STOP").unlink()
    assert cycle.run().plans == {rec.id: "done"}


def test_mode_off_only_reads_and_stores(
    make_cycle: CycleFactory, fake: FakeSlurm, store: Store
) -> None:
    report = make_cycle("off").run()
    assert (report.outcome, report.detail) == ("off", "mode=off")
    assert report.snapshot_id is not None
    assert fake.calls == []
    assert Plans(store.engine).recent() == []


def test_only_the_lease_holder_acts(
    make_cycle: CycleFactory, fake: FakeSlurm, store: Store, caplog: object
) -> None:
    a = make_cycle(holder="a:1")
    b = make_cycle(holder="b:2")
    assert a.run().outcome == "planned"
    calls = len(fake.calls)
    second = b.run()
    assert second.outcome == "read-only"
    assert "lease held by a:1" in second.detail
    assert len(fake.calls) == calls
    assert len(Plans(store.engine).recent()) == 1


class _Down:
    name = "down"

    def snapshot(self) -> ClusterSnapshot:
        raise SlurmUnavailableError("Slurm unavailable: squeue --json: connection refused")


def test_slurm_down_means_no_action_and_one_log_line(
    make_cycle: CycleFactory, fake: FakeSlurm, store: Store, caplog: object
) -> None:
    import logging

    import pytest

    assert isinstance(caplog, pytest.LogCaptureFixture)
    with caplog.at_level(logging.INFO, logger="slurm_defrag.service"):
        report = make_cycle(reader=_Down()).run()
    assert report.outcome == "slurm-unavailable"
    lines = [r for r in caplog.records if r.name.startswith("slurm_defrag.service")]
    assert len(lines) == 1
    assert "no action this cycle" in lines[0].getMessage()
    assert fake.calls == []
    # When Slurm is back, normal work resumes.
    assert make_cycle().run().outcome == "planned"


def test_a_dry_run_interrupted_by_a_crash_is_closed(
    make_cycle: CycleFactory, fake: FakeSlurm, store: Store
) -> None:
    # An open dry-run plan in the database, as a kill -9 in the middle of a cycle leaves it.
    plans = Plans(store.engine)
    stale = plans.create("test", "dry-run", {"plan": {}, "nodes": ["node01"]})
    assert make_cycle("dry-run").run().outcome == "planned"
    assert (plans.get(stale).status, plans.get(stale).note) == ("aborted", "dry-run interrupted")
    assert fake.calls == []


def test_two_plans_never_hold_the_same_node(
    store: Store, fake: FakeSlurm, clock: FakeClock
) -> None:
    ex, first = _admitted(store, fake, clock)
    assert ex.advance(first) == "applying"
    # A second plan for the same block (e.g. from another snapshot) is refused.
    again = make_plan(course_scenario(), default_policy())
    assert ex.admit(again) is None
    refused = Plans(store.engine).recent()[0]
    assert refused.status == "aborted"
    assert "node01 are in another open plan" in refused.note


def _done_requeue(plans: Plans, user: str, lost: float, for_users: list[str]) -> None:
    """A requeue another plan (or instance) finished: as the executor records it."""
    args = {"user": user, "lost_gpu_hours": lost, "for_users": users_field(for_users)}
    pid = plans.create("course", "enforce", {}, steps=[NewStep("requeue", "999", args)])
    plans.set_step_state(plans.steps(pid)[0].id, "done")
    plans.update(pid, status="done")


def _executor(
    store: Store, fake: FakeSlurm, clock: FakeClock, limits: dict[str, object]
) -> Executor:
    """The executor as the service builds it: the limits' history read from the store."""
    plans = Plans(store.engine)
    return Executor(
        Channel(fake, AuditingWriter(fake, plans, dry_run=False), plans, "enforce"),
        Safety(parse_policy({"version": 1, "limits": limits}), 900, StoreHistory(plans)),
        clock=clock,
    )


@pytest.mark.parametrize(
    ("limits", "moved"),
    [
        # dave (the target's user) may have 2 requeues of others' jobs a day; one was done
        # before the plan, another one after it was admitted
        ({"max_requeues_for_user_per_day": 2}, ("carol", 0.1, ["dave"])),
        ({"max_gpu_hours_lost_for_user_per_day": 1.0}, ("carol", 0.3, ["dave"])),
        # erin (the victim's user): her jobs may be requeued twice / lose 1 GPU-hour a day
        ({"max_preemptions_per_user_per_day": 2}, ("erin", 0.1, ["zoe"])),
        ({"max_gpu_hours_lost_per_user_per_day": 1.0}, ("erin", 0.3, ["zoe"])),
    ],
)
def test_the_executor_refuses_a_requeue_past_a_users_daily_budget(
    store: Store,
    fake: FakeSlurm,
    clock: FakeClock,
    limits: dict[str, object],
    moved: tuple[str, float, list[str]],
) -> None:
    """Issue #40: the per-user limits are checked again right before each requeue, on the
    history as it is then. The plan (110 for dave, requeueing erin's 104: 0.6 GPU-hours)
    fits when admitted; a requeue recorded meanwhile spends the rest, and the executor
    refuses: the plan rolls back, 104 keeps running."""
    plans = Plans(store.engine)
    _done_requeue(plans, "erin", 0.2, ["dave"])
    ex = _executor(store, fake, clock, limits)
    plan = make_plan(fake.snapshot(), default_policy())
    assert [v.job_id for v in plan.victims] == ["104"]
    pid = ex.admit(plan)
    assert pid is not None  # 1 + 1 requeues, 0.2 + 0.6 GPU-hours: within every budget
    (step,) = [s for s in plans.steps(pid) if s.action == "requeue"]
    assert (step.args["user"], step.args["for_users"]) == ("erin", "|dave|")
    _done_requeue(plans, *moved)
    assert ex.advance(pid) == "aborted"
    (key,) = limits
    assert f"limits.{key}" in plans.get(pid).note
    assert fake.jobs["104"]["state"] == JobState.RUNNING
    assert not any(c[0] == "requeue" for c in fake.calls)
    assert not [r for r in fake.reservations if r.startswith("defrag-")]


def test_a_plan_past_the_beneficiary_budget_is_refused_at_admission(
    store: Store, fake: FakeSlurm, clock: FakeClock
) -> None:
    plans = Plans(store.engine)
    _done_requeue(plans, "carol", 0.1, ["dave"])
    ex = _executor(store, fake, clock, {"max_requeues_for_user_per_day": 1})
    # a plan made without the history (e.g. by an older instance): the executor refuses it
    assert ex.admit(make_plan(fake.snapshot(), default_policy())) is None
    refused = plans.recent()[0]
    assert refused.status == "aborted"
    assert "limits.max_requeues_for_user_per_day: user dave" in refused.note
    assert fake.calls == []


def test_the_executor_counts_the_victims_work_lost_by_now(
    store: Store, fake: FakeSlurm, clock: FakeClock
) -> None:
    """The counts move with time too: 104's lost work grows while the plan waits (0.6
    GPU-hours at the plan, 1.1 fifteen minutes later), past dave's 1 GPU-hour."""
    ex = _executor(store, fake, clock, {"max_gpu_hours_lost_for_user_per_day": 1.0})
    pid = ex.admit(make_plan(fake.snapshot(), default_policy()))
    assert pid is not None
    clock.tick(15 * 60)
    assert ex.advance(pid) == "aborted"
    assert "1.10 GPU-hours" in Plans(store.engine).get(pid).note
    assert fake.jobs["104"]["state"] == JobState.RUNNING
