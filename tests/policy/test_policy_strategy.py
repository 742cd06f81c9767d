"""FreeNvlinkBlock turns falsely starved jobs into targets."""

from __future__ import annotations

from slurm_defrag.policy.free_nvlink_block import FreeNvlinkBlock, FreeNvlinkBlockArgs
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
