"""Plans, steps and Slurm commands: the audit trail of what was proposed and done."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import event

from slurm_defrag.metrics.compute import compute
from slurm_defrag.store.database import Store
from slurm_defrag.store.errors import NotFound
from slurm_defrag.store.plans import NewStep
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
