"""Issue #40: a pending job whose Slurm record did not read whole is no starved job.

What it asks for is unknown (its request is dropped), so it is neither counted as falsely
starved nor as demand: the figures describe the jobs that were read.
"""

from __future__ import annotations

from builders import unreadable
from slurm_defrag.metrics.compute import compute
from slurm_defrag.synth import course_scenario

REQUEST = "gres_request: squeue --json: jobs[9].tres_per_node: cannot parse GRES item 'x:y:z'"


def test_an_unreadable_pending_job_is_not_falsely_starved() -> None:
    assert [p.job_id for p in compute(course_scenario()).falsely_starved] == ["110"]
    report = compute(unreadable(course_scenario(), "110", REQUEST))
    assert report.falsely_starved == ()
    assert "110" not in {p.job_id for p in report.pending}
