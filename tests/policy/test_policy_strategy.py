"""FreeNvlinkBlock turns falsely starved jobs into targets."""

from __future__ import annotations

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.policy.free_nvlink_block import FreeNvlinkBlock, FreeNvlinkBlockArgs
from slurm_defrag.policy.queue_position import queue_positions
from slurm_defrag.synth import course_scenario


def test_course_job_110_is_proposed() -> None:
    (c,) = FreeNvlinkBlock().propose(course_scenario())
    assert c.job_id == "110"
    assert c.strategy == "free-nvlink-block"
    assert "falsely-starved" in c.reason


def test_filters() -> None:
    snap = course_scenario()
    assert FreeNvlinkBlock(FreeNvlinkBlockArgs(partitions=["other"])).propose(snap) == []
    assert FreeNvlinkBlock(FreeNvlinkBlockArgs(min_wait_minutes=60)).propose(snap) == []
    assert FreeNvlinkBlock(FreeNvlinkBlockArgs(reasons=["topology"])).propose(snap) == []


def test_min_gpus_per_node() -> None:
    snap = course_scenario()
    (job,) = [j for j in snap.jobs if j.id == "110"]
    assert job.request is not None
    shape = job.request.per_node_shape()
    assert shape is not None
    asks = shape[1]
    keep = FreeNvlinkBlock(FreeNvlinkBlockArgs(min_gpus_per_node=asks)).propose(snap)
    assert [c.job_id for c in keep] == ["110"]
    assert FreeNvlinkBlock(FreeNvlinkBlockArgs(min_gpus_per_node=asks + 1)).propose(snap) == []


def test_a_job_whose_limits_the_planner_cannot_read_takes_no_target_slot() -> None:
    snap = course_scenario()
    jobs = tuple(
        j.model_copy(update={"constraint": "[rack1|rack2]"}) if j.id == "110" else j
        for j in snap.jobs
    )
    assert FreeNvlinkBlock().propose(snap.model_copy(update={"jobs": jobs})) == []


def _with_pending_ahead(n: int, reason: str = "Priority") -> ClusterSnapshot:
    """The course with ``n`` small pending jobs of higher priority than job 110 ahead of it."""
    snap = course_scenario()
    (target,) = [j for j in snap.jobs if j.id == "110"]
    ahead = tuple(
        target.model_copy(update={"id": f"9{i}", "priority": target.priority + 1, "reason": reason})
        for i in range(n)
    )
    return snap.model_copy(update={"jobs": (*snap.jobs, *ahead)})


def test_queue_head_leaves_a_job_behind_higher_priority_work_alone() -> None:
    """Issue #41: a job further back waits for its turn, not for fragmentation."""
    head = FreeNvlinkBlockArgs(queue_head=2)
    assert "110" in [c.job_id for c in FreeNvlinkBlock(head).propose(_with_pending_ahead(1))]
    assert "110" not in [c.job_id for c in FreeNvlinkBlock(head).propose(_with_pending_ahead(2))]
    # held jobs are in nobody's way
    held = _with_pending_ahead(2, reason="JobHeldUser")
    assert "110" in [c.job_id for c in FreeNvlinkBlock(head).propose(held)]
    # off (the default): anywhere in the queue
    assert "110" in [c.job_id for c in FreeNvlinkBlock().propose(_with_pending_ahead(2))]


def test_queue_positions_order_by_priority_then_submit() -> None:
    snap = _with_pending_ahead(2)
    ahead = queue_positions(snap)
    assert ahead["110"] == 2
    assert sorted((ahead["90"], ahead["91"])) == [0, 1]
