"""Fairness per user (issue #40): one user's many large jobs cannot make the planner requeue
everyone else's jobs again and again.

The cluster: 12 nodes of 8 GPUs, every GPU held by a 1-GPU job of its own user (so no
victim-side limit ever binds), 30 minutes old. Alice submits ten 8-GPU NVLink jobs, Bob
two, Alice's at a higher priority: without a beneficiary limit the planner serves Alice
first, one 8-victim plan at a time (``max_victims_per_plan`` = 8). A simulated day of
hourly plans, each plan's requeues recorded in the history as the executor would, shows
the per-beneficiary budget holding, Bob served once Alice's is spent, then no requeue at
all; the next day Alice's budget is back. The ``large-job`` protection keeps a started
8-GPU job from being the next one's victim (without it the planner swaps Alice's own
large jobs: a churn no limit is about).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from builders import node, one_gpu_jobs
from slurm_defrag.actuator.limits import plan_violations, victim_refs
from slurm_defrag.domain.cluster import ClusterSnapshot, GpuRequest, Job, JobState
from slurm_defrag.domain.plan import Plan, apply_plan
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.policy.file import Policy, parse_policy
from slurm_defrag.policy.limits import InMemoryPreemptionHistory, Usage
from slurm_defrag.synth import EPOCH

NODES = 12
DAY = timedelta(days=1)


def policy(**limits: object) -> Policy:
    return parse_policy({"version": 1, "protections": {"extra": ["large-job"]}, "limits": limits})


def cluster(
    alice: int = 10, bob: int = 2, free_nodes: int = 0, at: datetime = EPOCH
) -> ClusterSnapshot:
    nodes, jobs = [], []
    for i in range(NODES):
        name = f"g{i:02d}"
        busy = i >= free_nodes
        nodes.append(node(name, gpus_used=range(8) if busy else ()))
        if not busy:
            continue
        jobs += one_gpu_jobs(name, i, range(8), at)
    for user, count, priority in (("alice", alice, 900), ("bob", bob, 100)):
        for k in range(count):
            jobs.append(
                Job(
                    id=f"{user}{k}",
                    user=user,
                    partition="batch",
                    priority=priority - k,
                    state=JobState.PENDING,
                    reason="Resources",
                    submit_time=at - timedelta(hours=1),
                    request=GpuRequest(gpus_per_node=8, nvlink=True),
                )
            )
    return ClusterSnapshot(cluster="fair", taken_at=at, nodes=tuple(nodes), jobs=tuple(jobs))


def pending_targets(snap: ClusterSnapshot) -> list[str]:
    return [j.id for j in snap.jobs if j.state is JobState.PENDING and j.request is not None]


def run_day(
    snap: ClusterSnapshot,
    policy: Policy,
    history: InMemoryPreemptionHistory,
    start: datetime,
    hours: int = 24,
) -> tuple[ClusterSnapshot, list[Plan]]:
    """Plan every hour, act on each plan at once (its requeues into the history, its
    targets running), as the service would."""
    plans = []
    for h in range(hours):
        now = start + timedelta(hours=h)
        snap = snap.model_copy(update={"taken_at": now})
        targets = pending_targets(snap)
        if not targets:
            break
        plan = make_plan(snap, policy, targets, history, now)
        assert not plan_violations(victim_refs(plan), policy.limits, history, now)
        for v in victim_refs(plan):
            history.record_requeue(now, v.job_id, v.user, v.lost_gpu_hours, v.for_users)
        if plan.served:
            snap = apply_plan(snap, plan)
        plans.append(plan)
    return snap, plans


def served_by(plans: list[Plan], user: str) -> list[str]:
    return [t.job_id for p in plans for t in p.served if t.user == user]


def test_without_the_beneficiary_limit_alice_takes_every_plan() -> None:
    """The abuse the limits are for: Alice's ten jobs would requeue 80 jobs of others."""
    off = policy(max_requeues_for_user_per_day=None, max_gpu_hours_lost_for_user_per_day=None)
    _, plans = run_day(cluster(), off, InMemoryPreemptionHistory(), EPOCH)
    assert served_by(plans, "alice") == [f"alice{k}" for k in range(10)]
    assert served_by(plans, "bob") == ["bob0", "bob1"]
    assert sum(len(p.victims) for p in plans) == 96


@pytest.mark.parametrize(
    ("limits", "alice_served", "bob_served"),
    [
        ({}, 2, 2),  # the defaults: 16 requeues for each a day, 8 per plan here
        ({"max_requeues_for_user_per_day": 20}, 2, 2),  # a third plan would make 24
        # 20 GPU-hours each: plans lose 8 x (h + 0.5) GPU-hours at hour h: Alice 4 + 12,
        # then Bob 20, and no one 28 more
        ({"max_requeues_for_user_per_day": None, "max_gpu_hours_lost_for_user_per_day": 20}, 2, 1),
    ],
)
def test_one_users_targets_requeue_at_most_her_budget_a_day(
    limits: dict[str, float], alice_served: int, bob_served: int
) -> None:
    pol = policy(**limits)
    history = InMemoryPreemptionHistory()
    _, plans = run_day(cluster(), pol, history, EPOCH)
    lim = pol.limits

    for user in ("alice", "bob"):
        spent = history.beneficiary_usage(user, EPOCH - DAY)
        if lim.max_requeues_for_user_per_day is not None:
            assert spent.requeues <= lim.max_requeues_for_user_per_day
        if lim.max_gpu_hours_lost_for_user_per_day is not None:
            assert spent.gpu_hours <= lim.max_gpu_hours_lost_for_user_per_day + 1e-9
    assert served_by(plans, "alice") == [f"alice{k}" for k in range(alice_served)]
    # Bob is served once Alice's budget is spent (hers are worth more), then nothing is
    # requeued any more for the rest of the day
    assert served_by(plans, "bob") == [f"bob{k}" for k in range(bob_served)]
    first_idle = next(i for i, p in enumerate(plans) if not p.victims)
    assert first_idle == alice_served + bob_served
    assert all(not p.victims for p in plans[first_idle:])
    assert len(plans) == 24
    # Alice's waiting jobs say why
    unserved = next(t for t in plans[-1].targets if t.user == "alice")
    assert "_for_user_per_day leaves alice" in unserved.explanation
    # every requeue was for someone else's pending job, and counted for them
    assert all(v.for_users for p in plans for v in victim_refs(p))

    # A day after her last requeue her budget is back (on a cluster of young jobs again:
    # the ones left here are a day old, each plan would lose 200 GPU-hours).
    last = max(r.at for r in history.requeues if "alice" in r.for_users)
    tomorrow = last + DAY + timedelta(minutes=1)
    _, later = run_day(cluster(at=tomorrow), pol, history, tomorrow, hours=1)
    assert served_by(later, "alice") == ["alice0"]


def test_the_budget_slides_with_the_day() -> None:
    """Any 24 hours: Alice's two plans (hours 0 and 1) spend her 16 requeues; just under
    a day after the first, nothing for her; just after it, one plan's worth again."""
    pol = policy()
    history = InMemoryPreemptionHistory()
    run_day(cluster(bob=0), pol, history, EPOCH, hours=3)
    assert history.beneficiary_usage("alice", EPOCH) == Usage(16, 16.0)
    for at, served in (
        (EPOCH + DAY - timedelta(minutes=1), []),
        (EPOCH + DAY + timedelta(minutes=1), ["alice0"]),
    ):
        _, plans = run_day(cluster(bob=0, at=at), pol, history, at, hours=1)
        assert served_by(plans, "alice") == served


def test_a_spent_budget_still_allows_a_free_block() -> None:
    """No requeue, no cost to anyone: a free NVLink block is hers whatever her budget."""
    history = InMemoryPreemptionHistory()
    for i in range(16):
        history.record_requeue(EPOCH - timedelta(hours=1), f"x{i}", f"v{i}", 0.5, ["alice"])
    plan = make_plan(
        cluster(bob=0, free_nodes=1),
        policy(),
        pending_targets(cluster(bob=0)),
        history,
    )
    (served,) = plan.served
    assert served.user == "alice"
    assert served.mode == "free"
    assert not plan.victims


def test_a_spent_budget_still_allows_a_drain() -> None:
    """Drains requeue nothing and lose no work: they never count against a budget."""
    snap = cluster(bob=0)
    # g00's jobs reach their time limit within the hour: a drain frees the block
    jobs = [
        j.model_copy(update={"time_limit_s": 3600}) if "g00" in j.gpus else j for j in snap.jobs
    ]
    snap = snap.model_copy(update={"jobs": tuple(jobs)})
    history = InMemoryPreemptionHistory()
    for i in range(16):
        history.record_requeue(EPOCH - timedelta(hours=1), f"x{i}", f"v{i}", 0.5, ["alice"])
    plan = make_plan(snap, policy(), pending_targets(snap), history)
    (served,) = plan.served
    assert served.mode == "drain"
    assert not plan.victims
    # with budget left, the drain still serves her first job (it costs no work), a
    # requeue the second
    fresh = make_plan(snap, policy(), pending_targets(snap), InMemoryPreemptionHistory())
    assert sorted(t.mode or "" for t in fresh.served) == ["drain", "requeue"]


def test_a_users_own_jobs_never_spend_her_beneficiary_budget() -> None:
    """Alice's jobs freed for Alice's pending job: the victim side counts them, not hers."""
    snap = cluster(alice=1, bob=0)
    jobs = [
        j.model_copy(update={"user": "alice"}) if j.state is JobState.RUNNING else j
        for j in snap.jobs
    ]
    snap = snap.model_copy(update={"jobs": tuple(jobs)})
    base = policy()
    limits = base.limits.model_copy(
        update={
            "max_requeues_for_user_per_day": 0,
            "max_preemptions_per_user_per_day": None,
            "max_gpu_hours_lost_per_user_per_day": None,
        }
    )
    plan = make_plan(snap, base.model_copy(update={"limits": limits}), ["alice0"])
    assert [t.job_id for t in plan.served] == ["alice0"]
    assert len(plan.victims) == 8
    assert all(r.for_users == () for r in victim_refs(plan))
