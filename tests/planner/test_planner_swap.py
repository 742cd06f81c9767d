"""The swap rule: a job is never requeued for shares on a node that take no more GPUs there
than it holds. Found live: with the default policy one user's 8-GPU jobs were requeued for
each other every cycle (46 for 48, 48 for 47, 47 for 46, ...) until her daily budget ran
out; each requeue freed nothing for the cluster, it only moved who waits.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from slurm_defrag.domain.cluster import ClusterSnapshot, GpuRequest, Job, JobState, Node
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.policy.file import Policy, default_policy
from slurm_defrag.synth import EPOCH


def _node(name: str) -> Node:
    return Node(
        name=name,
        partitions=("batch",),
        state=frozenset({"MIXED"}),
        gpu_model="h100",
        gpu_count=8,
        topology="nvswitch-8",
    )


def _running(jid: str, node: str, gpus: range, hours: float, user: str = "ann") -> Job:
    return Job(
        id=jid,
        user=user,
        partition="batch",
        state=JobState.RUNNING,
        start_time=EPOCH - timedelta(hours=hours),
        time_limit_s=48 * 3600,
        gpus={node: frozenset(gpus)},
    )


def _pending(jid: str, gpus: int, user: str = "ann") -> Job:
    return Job(
        id=jid,
        user=user,
        partition="batch",
        state=JobState.PENDING,
        reason="Resources",
        submit_time=EPOCH - timedelta(minutes=30),
        request=GpuRequest(gpus_per_node=gpus, nvlink=True),
    )


def _snap(nodes: list[str], jobs: list[Job]) -> ClusterSnapshot:
    return ClusterSnapshot(taken_at=EPOCH, nodes=tuple(_node(n) for n in nodes), jobs=tuple(jobs))


def _pruned(prune: str) -> Policy:
    p = default_policy()
    return p.model_copy(update={"solver": p.solver.model_copy(update={"prune": prune})})


@pytest.mark.parametrize("prune", ["never", "always"])
def test_one_users_8_gpu_jobs_are_not_swapped_for_each_other(prune: str) -> None:
    """The live churn: three 8-GPU jobs of ann's run on three 8-GPU nodes past
    min_runtime, a fourth waits. Requeueing one for it is no plan at all."""
    snap = _snap(
        ["gpu01", "gpu02", "gpu03"],
        [
            _running("46", "gpu01", range(8), 2.0),
            _running("47", "gpu02", range(8), 1.0),
            _running("48", "gpu03", range(8), 0.5),
            _pending("49", 8),
        ],
    )
    plan = make_plan(snap, _pruned(prune), ["49"])
    (target,) = plan.targets
    assert not target.served
    assert not plan.victims
    assert not plan.actions
    text = target.explanation
    assert "requeue jobs as large as its share there" in text, text
    assert "protected" not in text, text
    for jid, node in (("46", "gpu01"), ("47", "gpu02"), ("48", "gpu03")):
        assert f"job {jid} (8 GPUs on {node})" in text, text
    if prune == "never":  # (pruned, the notes show ranked nodes only: none here)
        notes = {n.node: n for n in target.node_notes}
        assert {n.verdict for n in notes.values()} == {"swap"}
        assert "job 48 (8 GPUs on gpu03)" in notes["gpu03"].detail


def test_the_policy_proposes_no_swap_either() -> None:
    """Without --target: the strategy's own targets get no same-size swap."""
    snap = _snap(
        ["gpu01", "gpu02"],
        [
            _running("46", "gpu01", range(8), 2.0),
            _running("47", "gpu02", range(8), 1.0),
            _pending("48", 8),
        ],
    )
    assert not make_plan(snap, default_policy()).victims


@pytest.mark.parametrize("prune", ["never", "always"])
def test_a_4_gpu_target_requeues_the_two_2_gpu_jobs_not_the_4_gpu_one(prune: str) -> None:
    """The 4-GPU job is by far the cheapest (1 h x 4 GPUs against 2 x 3 h x 2 GPUs), but
    requeueing it for a 4-GPU share is a swap."""
    snap = _snap(
        ["gpu01"],
        [
            _running("a4", "gpu01", range(4), 1.0, "bob"),
            _running("b2", "gpu01", range(4, 6), 3.0, "cid"),
            _running("c2", "gpu01", range(6, 8), 3.0, "dee"),
            _pending("t4", 4),
        ],
    )
    plan = make_plan(snap, _pruned(prune), ["t4"])
    (target,) = plan.targets
    assert target.served
    assert {v.job_id for v in plan.victims} == {"b2", "c2"}
    (p,) = target.placements
    assert set(p.gpus) == set(range(4, 8))


def test_the_4_gpu_job_is_still_requeued_for_a_larger_target() -> None:
    """The rule is about size, not about the 4-GPU job: an 8-GPU share may take it."""
    snap = _snap(
        ["gpu01"],
        [
            _running("a4", "gpu01", range(4), 1.0, "bob"),
            _running("b2", "gpu01", range(4, 6), 3.0, "cid"),
            _running("c2", "gpu01", range(6, 8), 3.0, "dee"),
            _pending("t8", 8),
        ],
    )
    plan = make_plan(snap, default_policy(), ["t8"])
    assert plan.targets[0].served
    assert {v.job_id for v in plan.victims} == {"a4", "b2", "c2"}


@pytest.mark.parametrize("prune", ["never", "always"])
def test_co_hosted_shares_may_requeue_a_job_smaller_than_them_together(prune: str) -> None:
    """A 6-GPU job and 2 free GPUs: a 4-GPU share alone may not requeue the 6-GPU job,
    two 4-GPU shares together (8 > 6) may; an 8-GPU job no pair of them may (8 >= 8)."""
    six = [_running("j6", "gpu01", range(6), 1.0, "bob")]
    alone = make_plan(_snap(["gpu01"], [*six, _pending("x", 4)]), _pruned(prune), ["x"])
    assert not alone.targets[0].served
    assert not alone.victims
    assert "job j6 (6 GPUs on gpu01)" in alone.targets[0].explanation

    both = make_plan(
        _snap(["gpu01"], [*six, _pending("x", 4), _pending("y", 4, "cid")]),
        _pruned(prune),
        ["x", "y"],
    )
    assert all(t.served for t in both.targets)
    assert [v.job_id for v in both.victims] == ["j6"]
    for t in both.targets:  # hosted beside each other, never alone
        (note,) = [n for n in t.node_notes if n.verdict == "chosen"]
        assert note.detail.startswith("beside other shares of the plan")

    eight = [_running("j8", "gpu01", range(8), 1.0, "bob")]
    pair = make_plan(
        _snap(["gpu01"], [*eight, _pending("x", 4), _pending("y", 4, "cid")]),
        _pruned(prune),
        ["x", "y"],
    )
    assert not pair.victims
    assert not any(t.served for t in pair.targets)


def test_a_multi_node_victim_counts_per_node() -> None:
    """Job m holds 2 GPUs on gpu01 and 6 on gpu02. A 4-GPU share may requeue it on gpu01
    (2 < 4), not on gpu02 (6 >= 4), though it is one job: the target goes to gpu01, where
    it costs a 1-GPU job more than m alone would on gpu02."""
    m = Job(
        id="m",
        user="bob",
        partition="batch",
        state=JobState.RUNNING,
        start_time=EPOCH - timedelta(hours=1),
        time_limit_s=48 * 3600,
        gpus={"gpu01": frozenset(range(2)), "gpu02": frozenset(range(6))},
    )
    rest = [
        _running("f0", "gpu01", range(3, 4), 2.0, "cid"),
        _running("f1", "gpu01", range(4, 8), 9.0, "cid"),
    ]
    snap = _snap(["gpu01", "gpu02"], [m, *rest, _pending("t", 4)])
    plan = make_plan(snap, default_policy(), ["t"])
    (target,) = plan.targets
    assert target.served
    (p,) = target.placements
    assert p.node == "gpu01"
    assert set(p.victims) == {"m", "f0"}
