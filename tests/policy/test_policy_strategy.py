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
