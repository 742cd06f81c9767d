"""The comparison baselines (Slurm's own preemption order, "free this node") on one node.

One 8-GPU NVSwitch node, every GPU busy: A holds 0-3 and has run 10 h, B holds 4-5 (1 h),
C holds 6-7 (2 h), listed in that order. A 4-GPU NVLink job waits. By hand: Slurm's
default order (partition tier, then fewer nodes; ties in listing order) takes A out first
and stops, then names every job on the node ("overlap") or only A ("removed"); youngest
first takes B, then C; free-node evicts the cheapest first (B, then C).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from builders import node
from slurm_defrag.baselines.free_node import free_node
from slurm_defrag.baselines.slurm_greedy import slurm_preempt
from slurm_defrag.domain.cluster import ClusterSnapshot, GpuRequest, Job, JobState
from slurm_defrag.policy.file import default_policy
from slurm_defrag.synth import EPOCH


def running(job_id: str, gpus: range, hours: float) -> Job:
    return Job(
        id=job_id,
        user=f"user-{job_id}",
        partition="batch",
        state=JobState.RUNNING,
        start_time=EPOCH - timedelta(hours=hours),
        time_limit_s=48 * 3600,
        gpus={"g1": frozenset(gpus)},
    )


def snapshot(target_gpus: int = 4) -> ClusterSnapshot:
    g1 = node("g1", model="h100", state="ALLOCATED", gpus_used=range(8))
    target = Job(
        id="T",
        user="waiting",
        partition="batch",
        state=JobState.PENDING,
        reason="Resources",
        request=GpuRequest(gpus_per_node=target_gpus, nvlink=True),
    )
    jobs = (running("A", range(4), 10), running("B", range(4, 6), 1), running("C", range(6, 8), 2))
    return ClusterSnapshot(taken_at=EPOCH, nodes=(g1,), jobs=(*jobs, target))


@pytest.mark.parametrize(
    ("order", "victims", "expected", "removed"),
    [
        ("tier", "removed", ("A",), 1),
        ("tier", "overlap", ("A", "B", "C"), 1),
        ("youngest", "removed", ("B", "C"), 2),
    ],
)
def test_slurm_order_and_victim_reading(
    order: str, victims: str, expected: tuple[str, ...], removed: int
) -> None:
    result = slurm_preempt(snapshot(), default_policy(), "T", order, victims)  # type: ignore[arg-type]
    assert result.served
    assert result.nodes == ("g1",)
    assert result.victims == expected
    assert result.removed_in_search == removed


def test_free_node_evicts_the_cheapest_first() -> None:
    result = free_node(snapshot(), default_policy(), "T")
    assert result.served
    assert result.victims == ("B", "C")
    # what is lost is what those two jobs ran: 2 GPUs x 1 h + 2 GPUs x 2 h
    assert result.lost_gpu_hours == pytest.approx(6.0)


def test_a_job_larger_than_any_node_is_not_served() -> None:
    assert not free_node(snapshot(target_gpus=16), default_policy(), "T").served
    assert not slurm_preempt(snapshot(target_gpus=16), default_policy(), "T").served
