"""CPUs and memory: a block of GPUs is only useful where the target's CPUs and memory fit.

Two 8-GPU nodes. On each, one job holds 2 GPUs (fewer than the target's 4: the swap rule
would never requeue a 4-GPU job for it); the other 6 are free. A pending 4-GPU job needs 16
CPUs. Without CPU data the planner needs no requeue (free GPUs on either node); with CPU
data, what the nodes' CPUs allow decides.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from slurm_defrag.domain.cluster import ClusterSnapshot, GpuRequest, Job, JobState, Node
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.policy.file import parse_policy
from slurm_defrag.synth import EPOCH

POLICY = parse_policy({"version": 1})


def _node(name: str, cpus_alloc: int | None, memory_alloc: int = 0) -> Node:
    return Node(
        name=name,
        partitions=("batch",),
        state=frozenset({"MIXED"}),
        gpu_model="a100",
        gpu_count=8,
        topology="nvswitch-8",
        cpus=None if cpus_alloc is None else 32,
        cpus_alloc=cpus_alloc or 0,
        memory_mb=None if cpus_alloc is None else 256_000,
        memory_alloc_mb=memory_alloc,
    )


def _holder(job_id: str, node: str, hours: float, cpus: int, memory: int = 0) -> Job:
    return Job(
        id=job_id,
        user="u",
        partition="batch",
        state=JobState.RUNNING,
        start_time=EPOCH - timedelta(hours=hours),
        time_limit_s=48 * 3600,
        gpus={node: frozenset(range(2))},
        cpus_per_node=cpus,
        memory_mb_per_node=memory,
    )


def _snapshot(
    nodes: tuple[Node, ...], jobs: tuple[Job, ...], cpus: int = 16, memory: int = 0
) -> ClusterSnapshot:
    target = Job(
        id="T",
        user="v",
        partition="batch",
        state=JobState.PENDING,
        reason="Resources",
        request=GpuRequest(gpus_per_node=4),
        cpus_per_node=cpus,
        memory_mb_per_node=memory,
    )
    return ClusterSnapshot(taken_at=EPOCH, nodes=nodes, jobs=(*jobs, target))


def _served_on(snap: ClusterSnapshot) -> tuple[str, tuple[str, ...]]:
    plan = make_plan(snap, POLICY, ["T"])
    (t,) = plan.targets
    assert t.served, t
    (p,) = t.placements
    return p.node, tuple(v.job_id for v in plan.victims)


def test_untracked_cpus_never_bind() -> None:
    snap = _snapshot(
        (_node("g1", None), _node("g2", None)),
        (_holder("1", "g1", 1, 28), _holder("2", "g2", 1, 28)),
    )
    assert _served_on(snap) == ("g1", ())


def test_free_gpus_without_free_cpus_are_skipped() -> None:
    # g1: 28 of 32 CPUs taken -> 4 free, too few; g2: 8 taken -> 24 free.
    snap = _snapshot(
        (_node("g1", 28), _node("g2", 8)), (_holder("1", "g1", 1, 28), _holder("2", "g2", 1, 8))
    )
    assert _served_on(snap) == ("g2", ())


def test_requeue_frees_the_victims_cpus() -> None:
    # Both nodes short of CPUs: requeueing a holder frees its GPUs and its CPUs; the
    # cheaper one (ran 1 h, not 10 h) is chosen.
    snap = _snapshot(
        (_node("g1", 28), _node("g2", 30)), (_holder("1", "g1", 10, 28), _holder("2", "g2", 1, 30))
    )
    assert _served_on(snap) == ("g2", ("2",))


def test_memory_binds_like_cpus() -> None:
    snap = _snapshot(
        (_node("g1", 4, memory_alloc=250_000), _node("g2", 4)),
        (_holder("1", "g1", 1, 4, 250_000), _holder("2", "g2", 1, 4)),
        memory=64_000,
    )
    assert _served_on(snap) == ("g2", ())


def test_cpus_of_other_jobs_cannot_be_freed() -> None:
    # 30 CPUs taken on the only node, 28 of them by a CPU-only job the planner cannot move.
    snap = _snapshot((_node("g1", 30),), (_holder("1", "g1", 1, 2),))
    plan = make_plan(snap, POLICY, ["T"])
    assert not plan.targets[0].served
    assert not plan.victims


@pytest.mark.parametrize("targets", [2, 3])
def test_shares_on_one_node_share_its_cpus(targets: int) -> None:
    # One idle 8-GPU node with 20 free CPUs: two 4-GPU targets fit its GPUs but only one
    # fits its CPUs (16 each).
    node = _node("g1", 12)
    jobs = tuple(
        Job(
            id=f"T{i}",
            user="v",
            partition="batch",
            state=JobState.PENDING,
            reason="Resources",
            request=GpuRequest(gpus_per_node=4),
            cpus_per_node=16,
        )
        for i in range(targets)
    )
    snap = ClusterSnapshot(taken_at=EPOCH, nodes=(node,), jobs=jobs)
    plan = make_plan(snap, POLICY, [j.id for j in jobs])
    assert sum(t.served for t in plan.targets) == 1


def test_a_job_holding_only_cpus_is_requeued_for_them() -> None:
    # One node: 6 GPUs free, but the 2-GPU holder took 28 of 32 CPUs. The free block is of
    # no use until the holder goes, although it holds none of the block's GPUs.
    snap = _snapshot((_node("g1", 28),), (_holder("1", "g1", 1, 28),))
    node, victims = _served_on(snap)
    assert (node, victims) == ("g1", ("1",))
    plan = make_plan(snap, POLICY, ["T"])
    assert plan.targets[0].placements[0].gpus == (2, 3, 4, 5)


def test_no_node_with_the_cpus_is_explained() -> None:
    snap = _snapshot((_node("g1", 30),), (_holder("1", "g1", 1, 2),), cpus=24)
    plan = make_plan(snap, POLICY, ["T"])
    assert not plan.targets[0].served
    assert "CPUs and memory" in plan.targets[0].explanation
