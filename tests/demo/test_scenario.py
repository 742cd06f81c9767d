"""The demo's cluster: the course's, grown, with large jobs blocked by fragmentation from
the first cycle on (the point of the demo), and the same jobs for the same seed."""

from __future__ import annotations

from datetime import UTC, datetime

from slurm_defrag.demo import scenario
from slurm_defrag.domain.cluster import JobState
from slurm_defrag.metrics.compute import compute
from slurm_defrag.synth import course_scenario

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def test_the_start_state_is_the_course_grown_with_two_jobs_falsely_starved() -> None:
    cluster = scenario.build(0, 3600.0, EPOCH)
    cluster.advance(0.0)
    snap = cluster.snapshot()
    course = course_scenario()
    for job in course.jobs:
        if job.state == JobState.RUNNING:
            assert snap.job_by_id[job.id].gpus == job.gpus  # where examples/course.json has it
    assert [n.name for n in snap.nodes] == [f"node0{i}" for i in range(1, 9)]
    report = compute(snap)
    assert {p.job_id for p in report.falsely_starved} == {"110", "122"}
    assert [j.id for j in snap.jobs if j.state == JobState.PENDING] == ["110", "122"]


def test_the_same_seed_gives_the_same_jobs() -> None:
    def jobs(seed: int) -> list[tuple[str, object]]:
        c = scenario.build(seed, 4 * 3600.0, EPOCH)
        return [(j.id, j.spec) for j in c.jobs.values()]

    assert jobs(3) == jobs(3)
    assert jobs(3) != jobs(4)
    assert len(jobs(3)) > 20  # a few jobs an hour at 90 % load
