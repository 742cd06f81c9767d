"""A simulated day of the service in enforce mode, one user submitting many large jobs
(issue #40, "disruption fair per user").

FakeSlurm, SQLite, a fake clock (5 minutes per cycle while a plan is in flight, an hour
otherwise), :func:`slurm_schedules` standing in for slurmctld. 12 nodes of 8 GPUs, each
with 7 GPUs held by 1-GPU jobs of their own users and one free: 12 free GPUs, none in an
8-GPU block, so the 8-GPU jobs are falsely starved and the default strategy proposes
them, as long as at least 8 GPUs are free (five started 8-GPU jobs use that up). Alice
submits ten 8-GPU NVLink jobs, Bob two, Alice's at a higher priority. Freeing a block
requeues 7 jobs of others.

With the default limits (16 requeues of others' jobs a day for one user's targets) the
service starts two of Alice's jobs (14 requeues; a third would make 21), then Bob's two,
then requeues nothing more that day; the planner already knew the budget, so no plan is
refused or rolled back. Without the beneficiary limit, Alice's jobs take every block the
cluster can give and Bob's never start.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from builders import node, one_gpu_jobs
from service_helpers import CycleFactory, FakeClock, slurm_schedules
from slurm_defrag.domain.cluster import ClusterSnapshot, GpuRequest, Job, JobState
from slurm_defrag.domain.plan import Plan
from slurm_defrag.policy.file import default_policy, parse_policy
from slurm_defrag.service.preemption_history import StoreHistory
from slurm_defrag.slurm.fake import FakeSlurm
from slurm_defrag.store.database import Store
from slurm_defrag.store.plans import Plans
from slurm_defrag.synth import EPOCH

ALICE = [str(2000 + k) for k in range(10)]
BOB = ["3000", "3001"]


def crowded() -> ClusterSnapshot:
    nodes, jobs = [], []
    for i in range(12):
        name = f"g{i:02d}"
        nodes.append(node(name, gpus_used=range(7)))
        jobs += one_gpu_jobs(name, i, range(7), EPOCH)
    for user, ids, priority in (("alice", ALICE, 900), ("bob", BOB, 100)):
        for k, jid in enumerate(ids):
            jobs.append(
                Job(
                    id=jid,
                    user=user,
                    partition="batch",
                    priority=priority - k,
                    state=JobState.PENDING,
                    reason="Resources",
                    submit_time=EPOCH - timedelta(hours=1),
                    # once started, they end beyond the simulated day: no drain waits for
                    # one (FakeSlurm never ends a job at its time limit)
                    time_limit_s=48 * 3600,
                    request=GpuRequest(gpus_per_node=8, nvlink=True),
                )
            )
    return ClusterSnapshot(cluster="fair", taken_at=EPOCH, nodes=tuple(nodes), jobs=tuple(jobs))


@pytest.fixture
def fake(clock: FakeClock) -> FakeSlurm:
    return FakeSlurm(crowded(), clock=clock)


def run_day(make_cycle: CycleFactory, fake: FakeSlurm, clock: FakeClock, store: Store,
            **policy: object) -> None:  # fmt: skip
    # large-job: a started 8-GPU job is never the next one's victim (the site setting for
    # large jobs, examples/policy-large-jobs.toml; without it plans swap large jobs)
    site = parse_policy({"version": 1, "protections": {"extra": ["large-job"]}, "limits": policy})
    cycle = make_cycle("enforce", policy=site)
    plans = Plans(store.engine)
    end = clock.now + timedelta(days=1)
    while clock.now < end:
        cycle.run()
        in_flight = plans.recent(open_only=True)
        for rec in in_flight:
            slurm_schedules(fake, Plan.model_validate(rec.inputs["plan"]))
        # 5 minutes while a plan is in flight (its TTL is 15), an hour when idle
        clock.tick(300 if in_flight else 3600)


def started(fake: FakeSlurm, ids: list[str]) -> list[str]:
    return [j for j in ids if fake.jobs[j]["state"] == JobState.RUNNING]


def requeued_for(store: Store) -> dict[str, list[str]]:
    """Target user -> the jobs requeued for them, from the done requeue steps."""
    plans = Plans(store.engine)
    out: dict[str, list[str]] = {}
    for rec in plans.recent(limit=1000):
        plan = Plan.model_validate(rec.inputs["plan"])
        users = {t.job_id: t.user for t in plan.targets}
        for s in plans.steps(rec.id):
            if s.action == "requeue" and s.state == "done":
                action = s.args["action"]
                out.setdefault(users[action["target"]], []).append(action["job_id"])
    return out


def test_one_user_many_large_jobs_spends_her_budget_then_waits(
    make_cycle: CycleFactory,
    fake: FakeSlurm,
    clock: FakeClock,
    store: Store,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="slurm_defrag.service.loop"):
        run_day(make_cycle, fake, clock, store)
    assert started(fake, ALICE) == ALICE[:2]
    assert started(fake, BOB) == BOB
    by_user = requeued_for(store)
    assert {u: len(v) for u, v in by_user.items()} == {"alice": 14, "bob": 14}
    # what the limits count, from the store: within the defaults, on both sides
    history = StoreHistory(Plans(store.engine))
    day = datetime.now(UTC) - timedelta(days=1)
    lim = default_policy().limits
    assert lim.max_requeues_for_user_per_day is not None
    assert lim.max_gpu_hours_lost_for_user_per_day is not None
    for user in ("alice", "bob"):
        spent = history.beneficiary_usage(user, day)
        assert spent.requeues == 14 <= lim.max_requeues_for_user_per_day
        assert spent.gpu_hours <= lim.max_gpu_hours_lost_for_user_per_day
    # the planner knew: every plan ran to the end, none was refused or rolled back
    recs = Plans(store.engine).recent(limit=1000)
    assert len(recs) == 4
    assert {r.status for r in recs} == {"done"}
    # nothing was requeued after Bob's second job, for the rest of the day
    requeues = [c for c in fake.calls if c[0] == "requeue"]
    assert len(requeues) == 28
    # and the service said why, in its "no plan" line: the first waiting job's budget
    idle = [r.getMessage() for r in caplog.records if "no plan:" in r.getMessage()]
    assert idle
    assert f"job {ALICE[2]}: " in idle[-1]
    assert "limits.max_requeues_for_user_per_day leaves alice 2 more" in idle[-1]


def test_without_the_beneficiary_limit_one_user_takes_every_plan(
    make_cycle: CycleFactory, fake: FakeSlurm, clock: FakeClock, store: Store
) -> None:
    run_day(
        make_cycle,
        fake,
        clock,
        store,
        max_requeues_for_user_per_day=None,
        max_gpu_hours_lost_for_user_per_day=None,
    )
    # every block the free GPUs allow (five) goes to Alice, 35 jobs of others requeued
    assert started(fake, ALICE) == ALICE[:5]
    assert started(fake, BOB) == []
    assert {u: len(v) for u, v in requeued_for(store).items()} == {"alice": 35}
