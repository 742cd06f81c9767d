"""N fully packed 8-GPU nodes of 1-GPU jobs and one 8-GPU target: exactly 8 victims."""

from __future__ import annotations

from datetime import timedelta

import pytest

from slurm_defrag.baselines.free_node import free_node
from slurm_defrag.baselines.slurm_greedy import slurm_preempt
from slurm_defrag.domain.cluster import ClusterSnapshot, GpuRequest, Job, JobState, Node
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.policy.file import default_policy
from slurm_defrag.synth import EPOCH


def packed(n_nodes: int, k: int = 8) -> ClusterSnapshot:
    """Job start times are interleaved over nodes, as a busy scheduler would leave them."""
    t = EPOCH
    nodes = tuple(
        Node(
            name=f"g{i:03d}",
            partitions=("batch",),
            state=frozenset({"ALLOCATED"}),
            gpu_model="h100",
            gpu_count=8,
            topology="nvswitch-8",
        )
        for i in range(n_nodes)
    )
    jobs = []
    for g in range(8):
        for i in range(n_nodes):
            jid = len(jobs) + 1
            jobs.append(
                Job(
                    id=str(jid),
                    user=f"u{jid % 7}",
                    partition="batch",
                    state=JobState.RUNNING,
                    priority=(jid * 7919) % 1000,
                    start_time=t - timedelta(hours=1 + (jid * 37 % 100) / 10),
                    time_limit_s=48 * 3600,
                    gpus={f"g{i:03d}": frozenset({g})},
                )
            )
    jobs.append(
        Job(
            id="target",
            user="x",
            partition="batch",
            state=JobState.PENDING,
            reason="Resources",
            request=GpuRequest(gpus_per_node=k, nvlink=True),
        )
    )
    return ClusterSnapshot(taken_at=t, nodes=nodes, jobs=tuple(jobs))


@pytest.mark.parametrize("n_nodes", [1, 2, 8, 32, 128])
def test_eight_victims(n_nodes: int) -> None:
    policy = default_policy().model_copy(
        update={"limits": default_policy().limits.model_copy(update={"max_victims_per_plan": None})}
    )
    plan = make_plan(packed(n_nodes), policy, ["target"])
    assert plan.targets[0].served
    assert len(plan.victims) == 8
    assert len({n for v in plan.victims for n in v.gpus}) == 1
    assert plan.solver.optimality == "proven"


def test_baselines_on_a_4_gpu_target() -> None:
    snap = packed(8, k=4)
    policy = default_policy()
    plan = make_plan(snap, policy, ["target"])
    assert len(plan.victims) == 4
    overlap = slurm_preempt(snap, policy, "target", "tier", "overlap")
    assert len(overlap.victims) == 8  # every job on the chosen node
    assert len(free_node(snap, policy, "target").victims) == 4
