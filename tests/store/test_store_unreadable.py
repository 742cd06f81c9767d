"""Issue #40: a snapshot with job records a reader could not read whole is stored exactly.

The job's ``unreadable`` reason lives in its JSON body (the store keeps jobs as their
model's JSON, so no column and no migration), the records left out in the snapshot's
config body; both are absent from those bodies when empty, so earlier rows and their
hashes are unchanged.
"""

from __future__ import annotations

from builders import unreadable
from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.metrics.compute import compute
from slurm_defrag.store import codec
from slurm_defrag.store.database import Store
from slurm_defrag.store.repo import Repository
from slurm_defrag.synth import course_scenario

REASON = "gres_request: squeue --json: jobs[9].tres_per_node: cannot parse GRES item 'x:y:z'"
LEFT_OUT = "state: squeue --json: jobs[10].job_state: unknown job state 'SLEEPING' (job 111)"


def test_unreadable_jobs_and_left_out_records_round_trip(store: Store) -> None:
    repo = Repository(store)
    snap = unreadable(course_scenario(), "110", REASON)
    snap = ClusterSnapshot.model_validate({**snap.model_dump(), "left_out": [LEFT_OUT]})
    sid = repo.save_snapshot(snap, compute(snap))
    back = repo.load_snapshot(sid)
    assert back == snap
    assert back.job_by_id["110"].unreadable == REASON
    assert back.left_out == (LEFT_OUT,)
    # the next snapshot reads the job whole again: a new version of it, and no left-out
    later = course_scenario().model_copy(update={"taken_at": snap.taken_at.replace(minute=59)})
    assert repo.load_snapshot(repo.save_snapshot(later, compute(later))) == later


def test_bodies_without_unreadable_records_are_unchanged() -> None:
    course = course_scenario()
    _, body = codec.config_body(course)
    assert "left_out" not in body
    assert all("unreadable" not in j.model_dump_json() for j in course.jobs)
