"""``slurm-defrag top --db``: the stored history's latest snapshot, replay with ``--at``, and
the plan in progress, on SQLite and PostgreSQL.

The course snapshot (12:00, job 110 falsely starved) is stored with the planner's plan for
it (reserve node01, requeue 104, wait, hand over, release), part-way applied; then the
cluster as it is once the plan has run, an hour later (110 running, nobody starved).
"""

from __future__ import annotations

from datetime import timedelta

from typer.testing import CliRunner

from infra import EXAMPLES
from slurm_defrag.cli import app
from slurm_defrag.domain.plan import apply_plan
from slurm_defrag.metrics.compute import compute
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.policy.file import default_policy
from slurm_defrag.snapshot_file import load_snapshot
from slurm_defrag.store.database import Store
from slurm_defrag.store.plans import NewStep
from slurm_defrag.store.repo import Repository


def top(*args: str) -> str:
    result = CliRunner().invoke(app, ["top", *args, "--once"],
                                env={"COLUMNS": "160", "NO_COLOR": "1"})  # fmt: skip
    assert result.exit_code == 0, result.output
    return result.output


def test_plan_in_progress_and_replay(store: Store, db_url: str) -> None:
    repo = Repository(store)
    before = load_snapshot(EXAMPLES / "course.json")
    sid = repo.save_snapshot(before, compute(before))
    plan = make_plan(before, default_policy())
    assert [v.job_id for v in plan.victims] == ["104"]
    steps = [NewStep(a.kind.value, a.job_id or ",".join(a.nodes) or (a.target or ""))
             for a in plan.actions]  # fmt: skip
    pid = repo.plans.create(before.cluster, "enforce", {"plan": plan.model_dump(mode="json")},
                            snapshot_id=sid, steps=steps)  # fmt: skip
    repo.plans.update(pid, status="applying")
    first, second, *_ = repo.plans.steps(pid)
    repo.plans.set_step_state(first.id, "running")
    repo.plans.set_step_state(first.id, "done")
    repo.plans.set_step_state(second.id, "running")

    shown = top("--db", db_url)
    assert f"source database {store.url}" in " ".join(shown.split())
    assert "110  dave  1x3 nvlink  spatial" in shown
    assert "Plans in progress" in shown
    row = next(line for line in shown.splitlines() if line.startswith(f"#{pid} "))
    for cell in (plan.plan_id, "applying", "110 (1x3 nvlink)", "104 (erin)",
                 "1. reserve node01 done"):  # fmt: skip
        assert cell in row
    assert "2. requeue 104 running" in shown
    assert "3. wait-free node01 pending" in shown

    # An hour later the plan has run: 110 holds GPUs, nobody is starved, the plan is done.
    after = apply_plan(before, plan).model_copy(
        update={"taken_at": before.taken_at + timedelta(hours=1)}
    )
    repo.save_snapshot(after, compute(after))
    repo.plans.update(pid, status="done")
    latest = top("--db", db_url)
    assert "snapshot 2026-11-29 13:00:00 UTC" in latest
    assert "no falsely starved job" in latest
    assert f"#{pid} {plan.plan_id}  done" in latest  # no open plan: the most recent one
    # ... shown as the last plan, closed, not as a plan in progress.
    assert "no plan in progress" in latest
    assert "Plans in progress" not in latest
    assert latest.index("Last plan (closed)") < latest.index(f"#{pid} {plan.plan_id}  done")

    # Replaying 12:30 shows the 12:00 snapshot; the plan was created later (now), so none.
    replay = top("--db", db_url, "--at", "2026-11-29T12:30")
    assert "snapshot 2026-11-29 12:00:00 UTC" in replay
    assert "as of 2026-11-29 12:30:00 UTC" in " ".join(replay.split())  # may wrap
    assert "110  dave  1x3 nvlink  spatial" in replay
    assert "no plan in progress" in replay

    # A snapshot file with the plans of the database beside it.
    beside = top("--snapshot", str(EXAMPLES / "course.json"), "--db", db_url)
    assert "source file" in beside
    assert f"#{pid} {plan.plan_id}" in beside


def test_dry_run_plan_steps_show_as_not_executed(store: Store, db_url: str) -> None:
    repo = Repository(store)
    before = load_snapshot(EXAMPLES / "course.json")
    repo.save_snapshot(before, compute(before))
    plan = make_plan(before, default_policy())
    pid = repo.plans.create(before.cluster, "dry-run", {"plan": plan.model_dump(mode="json")},
                            steps=[NewStep("reserve", "node01")])  # fmt: skip
    (step,) = repo.plans.steps(pid)
    repo.plans.set_step_state(step.id, "running")
    repo.plans.set_step_state(step.id, "done")
    repo.plans.update(pid, status="done")
    shown = " ".join(top("--db", db_url).split())
    assert "Last plan (closed)" in shown
    assert "1. reserve node01 not executed (dry-run)" in shown
    assert "dry-run: nothing executed in Slurm" in shown
