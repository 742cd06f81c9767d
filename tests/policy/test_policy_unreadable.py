"""Issue #40: the strategy never proposes a job whose Slurm record did not read whole."""

from __future__ import annotations

from builders import unreadable
from slurm_defrag.policy.free_nvlink_block import FreeNvlinkBlock, FreeNvlinkBlockArgs
from slurm_defrag.synth import course_scenario

REQUEST = "gres_request: squeue --json: jobs[9].tres_per_node: cannot parse GRES item 'x:y:z'"


def test_free_nvlink_block_skips_an_unreadable_pending_job() -> None:
    args = FreeNvlinkBlockArgs(statuses=["falsely-starved", "short", "can-start"])
    strategy = FreeNvlinkBlock(args)
    assert [c.job_id for c in strategy.propose(course_scenario())] == ["110"]
    assert strategy.propose(unreadable(course_scenario(), "110", REQUEST)) == []
