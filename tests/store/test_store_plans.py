"""Plans, steps and Slurm commands: the audit trail of what was proposed and done."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import event

from slurm_defrag.metrics.compute import compute
from slurm_defrag.policy.limits import PreemptionHistory, Usage
from slurm_defrag.service.preemption_history import StoreHistory
from slurm_defrag.store.database import Store
from slurm_defrag.store.database_errors import NotFound
from slurm_defrag.store.plans import NewStep, Plans, users_field
from slurm_defrag.store.repo import Repository
from slurm_defrag.synth import course_scenario


def test_plan_lifecycle(store: Store) -> None:
    repo = Repository(store)
    snap = course_scenario()
    sid = repo.save_snapshot(snap, compute(snap))
    pid = repo.plans.create(
        snap.cluster, "dry-run", {"policy": "free-nvlink-block", "max_requeues": 2},
        snapshot_id=sid, solver_status="OPTIMAL", objective=3.0, bound=3.0, solve_time_s=0.2,
        holder="host:1",
        steps=[NewStep("requeue", "104"), NewStep("reserve", "node01", {"gpus": [4, 5, 6]})],
    )  # fmt: skip
    plan = repo.plans.get(pid)
    assert (plan.mode, plan.status, plan.open, plan.objective) == ("dry-run", "open", True, 3.0)
    assert plan.inputs["max_requeues"] == 2
    assert repo.plans.recent(open_only=True)[0].id == pid

    steps = repo.plans.steps(pid)
    assert [(s.seq, s.action, s.target, s.state) for s in steps] == [
        (0, "requeue", "104", "pending"),
        (1, "reserve", "node01", "pending"),
    ]
    assert steps[1].args == {"gpus": [4, 5, 6]}
    (extra,) = repo.plans.add_steps(pid, [NewStep("drain", "node04")])
    assert repo.plans.steps(pid)[-1].seq == 2

    running = repo.plans.set_step_state(steps[0].id, "running")
    assert running.started_at is not None
    assert running.finished_at is None
    cid = repo.plans.record_command(
        ["scontrol", "requeue", "104"], exit_code=0, duration_s=0.05, stdout="",
        plan_id=pid, step_id=steps[0].id,
    )  # fmt: skip
    repo.plans.record_command(
        ["squeue", "--json"], exit_code=None, duration_s=30.0, stderr="timeout"
    )
    done = repo.plans.set_step_state(steps[0].id, "done")
    assert done.finished_at is not None
    failed = repo.plans.set_step_state(extra, "failed", "node busy")
    assert failed.error == "node busy"

    cmds = repo.plans.commands(plan_id=pid)
    assert [(c.id, c.argv, c.exit_code) for c in cmds] == [(cid, ["scontrol", "requeue", "104"], 0)]
    assert repo.plans.commands()[-1].exit_code is None
    assert repo.plans.commands()[-1].outcome == "no exit code (Slurm unreachable)"
    assert cmds[0].executed
    assert cmds[0].outcome == "0"
    # A dry-run preview: never executed, so never an exit code, whatever the caller passed.
    repo.plans.record_command(
        ["scontrol", "requeue", "105"], exit_code=0, duration_s=0.0, dry_run=True,
        executed=False, plan_id=pid,
    )  # fmt: skip
    preview = repo.plans.commands(plan_id=pid)[-1]
    assert (preview.executed, preview.exit_code, preview.dry_run) == (False, None, True)
    assert preview.outcome == "not executed (dry-run)"

    closed = repo.plans.update(pid, status="done", note="2 of 3 steps")
    assert closed.closed_at is not None
    assert not closed.open
    assert repo.plans.recent(open_only=True) == []


def test_plan_errors(store: Store) -> None:
    plans = Repository(store).plans
    with pytest.raises(ValueError, match="mode must be one of dry-run, enforce"):
        plans.create("c", "yolo", {})
    pid = plans.create("c", "enforce", {})
    with pytest.raises(ValueError, match="status must be one of"):
        plans.update(pid, status="weird")
    with pytest.raises(NotFound, match="no plan 424242"):
        plans.get(424242)
    with pytest.raises(NotFound, match="no plan step 99"):
        plans.set_step_state(99, "done")


def test_requeues_since_counts_done_enforce_requeues_in_one_query(store: Store) -> None:
    """The count the limits and ``preemptions_last_hour`` use (SQLite; PostgreSQL runs the
    same portable query)."""
    plans = Repository(store).plans
    before = datetime.now(UTC) - timedelta(seconds=1)

    def plan(mode: str, cluster: str, *steps: tuple[str, str, str]) -> None:
        pid = plans.create(
            cluster,
            mode,
            {},
            steps=[
                NewStep(action, f"j{i}", {"user": user})
                for i, (action, user, _) in enumerate(steps)
            ],
        )
        for step, (_, _, state) in zip(plans.steps(pid), steps, strict=True):
            if state != "pending":
                plans.set_step_state(step.id, state)

    plan(
        "enforce",
        "c1",
        ("requeue", "ann", "done"),
        ("requeue", "bob", "done"),
        ("requeue", "ann", "failed"),
        ("requeue", "ann", "pending"),
        ("reserve", "ann", "done"),
    )
    plan("enforce", "c2", ("requeue", "ann", "done"))
    plan("dry-run", "c1", ("requeue", "ann", "done"))  # changed nothing: never counts
    queries: list[str] = []
    event.listen(store.engine, "before_cursor_execute", lambda *args: queries.append(args[2]))
    assert plans.requeues_since(before) == 3
    assert len([q for q in queries if q.startswith("SELECT")]) == 1
    assert plans.requeues_since(before, cluster="c1") == 2
    assert plans.requeues_since(before, user="ann") == 2
    assert plans.requeues_since(before, cluster="c1", user="ann") == 1
    assert plans.requeues_since(before, user="cat") == 0
    assert plans.requeues_since(datetime.now(UTC) + timedelta(seconds=1)) == 0
    # In another zone, the same instant.
    assert plans.requeues_since(before.astimezone(timezone(timedelta(hours=-5)))) == 3


def test_requeue_usage_per_user_and_per_beneficiary_in_one_query(store: Store) -> None:
    """Issue #40: what the per-user limits count, from the steps' args the executor writes
    (``user``, ``lost_gpu_hours``, ``for_users``): one user's requeued jobs (victim side)
    and other users' jobs requeued for one user's pending jobs (beneficiary side), count
    and GPU-hours, in one query each; no new table or column."""
    plans = Repository(store).plans
    before = datetime.now(UTC) - timedelta(seconds=1)

    def requeue(user: str, lost: float, for_users: list[str], state: str = "done") -> None:
        args = {"user": user, "lost_gpu_hours": lost, "for_users": users_field(for_users)}
        pid = plans.create("c1", "enforce", {}, steps=[NewStep("requeue", "j", args)])
        (step,) = plans.steps(pid)
        plans.set_step_state(step.id, state)

    requeue("bob", 2.5, ["ann"])
    requeue("cid", 1.0, ["ann", "dee"])  # freed GPUs for two users' targets: counts for both
    requeue("bob", 4.0, ["dee"])
    requeue("bob", 9.0, ["ann"], state="failed")  # not done: never counts
    requeue("eve", 0.5, [])  # for the user's own job: no beneficiary
    # hostile names: the separator, LIKE's wildcards, a name inside another's
    requeue("x", 3.0, ["a|b", "%", "an_"])
    pid = plans.create("c1", "dry-run", {}, steps=[NewStep("requeue", "j", {"user": "bob"})])
    plans.set_step_state(plans.steps(pid)[0].id, "done")  # dry-run: nothing happened
    # a step written before for_users existed: the victim side still counts it
    old = plans.create("c1", "enforce", {}, steps=[NewStep("requeue", "j", {"user": "bob"})])
    plans.set_step_state(plans.steps(old)[0].id, "done")

    queries: list[str] = []
    event.listen(store.engine, "before_cursor_execute", lambda *args: queries.append(args[2]))
    assert plans.requeue_usage_since(before, for_user="ann") == (2, pytest.approx(3.5))
    assert len([q for q in queries if q.startswith("SELECT")]) == 1
    assert plans.requeue_usage_since(before, for_user="dee") == (2, pytest.approx(5.0))
    assert plans.requeue_usage_since(before, user="bob") == (3, pytest.approx(6.5))
    assert plans.requeue_usage_since(before, user="nobody") == (0, 0.0)
    assert plans.requeue_usage_since(before, for_user="eve") == (0, 0.0)
    assert plans.requeue_usage_since(before, for_user="a|b") == (1, pytest.approx(3.0))
    assert plans.requeue_usage_since(before, for_user="%") == (1, pytest.approx(3.0))
    for other in ("a", "b", "an", "anX", "_", ""):
        assert plans.requeue_usage_since(before, for_user=other) == (0, 0.0), other
    later = datetime.now(UTC) + timedelta(seconds=1)
    assert plans.requeue_usage_since(later, for_user="ann") == (0, 0.0)
    assert plans.requeue_usage_since(before, cluster="c2", for_user="ann") == (0, 0.0)

    history = StoreHistory(plans)
    assert isinstance(history, PreemptionHistory)
    assert history.beneficiary_usage("ann", before) == Usage(2, pytest.approx(3.5))
    assert history.victim_usage("bob", before) == Usage(3, pytest.approx(6.5))
    assert history.user_preemptions_since("bob", before) == 3


def test_users_field() -> None:
    assert users_field([]) == ""
    assert users_field(["bob", "ann", "bob"]) == "|ann|bob|"
    assert users_field(["a|b", "%"]) == "|%25|a%7Cb|"


def test_every_users_day_in_one_query(store: Store) -> None:
    """``usage_by_user``: what the planner reads each cycle for every user at once, the
    same figures as the per-user queries."""
    plans = Repository(store).plans
    before = datetime.now(UTC) - timedelta(seconds=1)
    for user, lost, for_users in (
        ("bob", 2.5, ["ann"]),
        ("cid", 1.0, ["ann", "a|b"]),
        ("ann", 4.0, ["ann"]),  # her own job, requeued for her: victim side only
    ):
        args = {"user": user, "lost_gpu_hours": lost, "for_users": users_field(for_users)}
        pid = plans.create("c1", "enforce", {}, steps=[NewStep("requeue", "j", args)])
        plans.set_step_state(plans.steps(pid)[0].id, "done")
    queries: list[str] = []
    event.listen(store.engine, "before_cursor_execute", lambda *args: queries.append(args[2]))
    usage = StoreHistory(plans).usage_by_user(before)
    assert len([q for q in queries if q.startswith("SELECT")]) == 1
    assert usage.beneficiary == {"ann": Usage(2, 3.5), "a|b": Usage(1, 1.0)}
    assert usage.victim == {"bob": Usage(1, 2.5), "cid": Usage(1, 1.0), "ann": Usage(1, 4.0)}
    for user in ("ann", "bob", "a|b", "zed"):
        assert usage.for_(user) == plans_usage(plans, before, for_user=user)
        assert usage.of(user) == plans_usage(plans, before, user=user)


def plans_usage(plans: Plans, since: datetime, **who: str) -> Usage:
    n, hours = plans.requeue_usage_since(since, **who)
    return Usage(n, pytest.approx(hours))  # type: ignore[arg-type]
