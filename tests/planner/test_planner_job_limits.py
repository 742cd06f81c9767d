"""A target's own ``-w`` / ``-x`` / ``--constraint`` decide where the planner frees a block.

A block freed where the job may not run is a requeue for nothing; a limit the planner
cannot read makes the job no target (never a guess).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from slurm_defrag.domain.cluster import ClusterSnapshot, GpuRequest, Job, JobState, Node
from slurm_defrag.domain.job_limits import job_limits
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.policy.file import default_policy
from slurm_defrag.synth import EPOCH

NODES = 6


def packed(*targets: Job, features: dict[str, tuple[str, ...]] | None = None) -> ClusterSnapshot:
    """``NODES`` nodes full of 1-GPU jobs; node g000's are the youngest (cheapest)."""
    features = features or {}
    nodes = tuple(
        Node(
            name=f"g{i:03d}",
            partitions=("batch",),
            state=frozenset({"ALLOCATED"}),
            gpu_model="h100",
            gpu_count=8,
            topology="nvswitch-8",
            features=features.get(f"g{i:03d}", ()),
        )
        for i in range(NODES)
    )
    jobs = [
        Job(
            id=f"r{i}-{g}",
            partition="batch",
            state=JobState.RUNNING,
            start_time=EPOCH - timedelta(hours=1 + i),
            time_limit_s=48 * 3600,
            gpus={f"g{i:03d}": frozenset({g})},
        )
        for i in range(NODES)
        for g in range(8)
    ]
    return ClusterSnapshot(taken_at=EPOCH, nodes=nodes, jobs=(*jobs, *targets))


def target(job_id: str = "t", **limits: str) -> Job:
    return Job(
        id=job_id,
        partition="batch",
        state=JobState.PENDING,
        reason="Resources",
        request=GpuRequest(gpus_per_node=8, nvlink=True),
        **limits,
    )


def nodes_of(snapshot: ClusterSnapshot, ids: list[str], prune: str = "never") -> dict[str, str]:
    base = default_policy()
    policy = base.model_copy(
        update={
            # no limit binds: every job here is the same (anonymous) user's, so the
            # per-user defaults (issue #40) would cap all four targets' victims together
            "limits": base.limits.model_copy(
                update={
                    "max_victims_per_plan": None,
                    "max_preemptions_per_user_per_day": None,
                    "max_gpu_hours_lost_per_user_per_day": None,
                }
            ),
            "solver": base.solver.model_copy(update={"prune": prune}),
        }
    )
    plan = make_plan(snapshot, policy, ids)
    return {t.job_id: t.placements[0].node if t.served else "" for t in plan.targets}


def test_without_limits_the_cheapest_node() -> None:
    assert nodes_of(packed(target()), ["t"]) == {"t": "g000"}


@pytest.mark.parametrize(
    ("limits", "node"),
    [
        ({"excluded_nodes": "g[000-001]"}, "g002"),
        ({"required_nodes": "g004"}, "g004"),
        ({"required_nodes": "g005", "constraint": "big&ib"}, "g005"),
        ({"constraint": "big"}, "g003"),
        ({"constraint": "big&ib"}, "g005"),
        ({"constraint": "ib|nope"}, "g001"),
    ],
)
def test_the_cheapest_node_the_job_may_use(limits: dict[str, str], node: str) -> None:
    features = {"g001": ("ib",), "g003": ("big",), "g005": ("big", "ib")}
    assert nodes_of(packed(target(**limits), features=features), ["t"]) == {"t": node}


@pytest.mark.parametrize(
    ("limits", "why"),
    [
        ({"excluded_nodes": "g[0-99999999]"}, "-x 'g[0-99999999]' unreadable"),
        ({"required_nodes": "g[000"}, "-w 'g[000' unreadable"),
        ({"constraint": "[rack1*2&rack2*4]"}, "not modelled"),
        ({"constraint": "a&b|c"}, "not modelled"),
        ({"constraint": "!big"}, "not modelled"),
        ({"required_nodes": "g[003-005]"}, "-w names 3 nodes, the job needs 1"),
        ({"excluded_nodes": "g[1][\n]"}, "characters a host list does not hold"),
    ],
)
def test_unreadable_limits_make_no_target(limits: dict[str, str], why: str) -> None:
    snap = packed(target(**limits))
    plan = make_plan(snap, default_policy(), ["t"])
    (outcome,) = plan.targets
    assert not outcome.served
    assert not plan.victims
    assert why in outcome.explanation


def test_required_nodes_other_than_the_job_needs_are_not_modelled() -> None:
    job = target(required_nodes="g001").model_copy(
        update={"request": GpuRequest(nodes=2, gpus_per_node=8, nvlink=True)}
    )
    assert "-w names 1 node, the job needs 2" in job_limits(job, 2).unreadable


def test_pruned_classes_keep_each_targets_own_nodes() -> None:
    """Same demand, different limits: pruning keeps a list of nodes per limit set."""
    targets = [
        target("a", excluded_nodes="g[000-002]"),
        target("b"),
        target("c", required_nodes="g001"),
        target("d", constraint="big"),
    ]
    got = nodes_of(
        packed(*targets, features={"g005": ("big",)}), ["a", "b", "c", "d"], prune="always"
    )
    assert got == {"a": "g003", "b": "g000", "c": "g001", "d": "g005"}
    unpruned = packed(*targets, features={"g005": ("big",)})
    assert nodes_of(unpruned, ["a", "b", "c", "d"]) == got


def test_a_hostile_list_is_sized_not_expanded() -> None:
    limits = job_limits(target(excluded_nodes="n[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]"), 1)
    assert "unreadable" in limits.unreadable
