"""``read_site_jobs`` on sacct recorded from the compose Slurm clusters (22.05 and 24.11,
``bench/record_sacct.py``: arrays, two-node, failed, timed-out, cancelled and requeued
jobs of three users; ``tests/fixtures/sacct/rec-<release>/README.txt`` says how). The
JSON is stored without its indentation, content unchanged."""

from __future__ import annotations

import pytest

from infra import ROOT
from slurm_defrag.slurm.parse.sacct import read_site_jobs
from slurm_defrag.snapshot_file import load_snapshot
from slurm_defrag.traces.site import MULTI_NODE, site_workload

FIXTURES = ROOT / "tests" / "fixtures" / "sacct"


@pytest.mark.parametrize("release", ["22.05", "24.11"])
def test_the_text_and_the_json_of_one_recording_are_the_same_jobs(release: str) -> None:
    folder = FIXTURES / f"rec-{release}"
    text = read_site_jobs(folder / "sacct.txt")
    js = read_site_jobs(folder / "sacct.json")
    assert text.jobs == js.jobs
    assert text.records == js.records == 124
    assert text.problems == js.problems == []
    assert text.skipped == js.skipped == {"earlier runs of requeued jobs": 2}
    jobs = text.jobs
    assert len(jobs) == 122
    assert {j.state for j in jobs} == {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED"}
    assert sum(j.runs == 2 for j in jobs) == 2  # requeued while running
    assert sum("_" in j.job_id for j in jobs) == 32  # 8 arrays of 4 tasks
    assert sum(j.nodes == 2 for j in jobs) == 8
    timeout = next(j for j in jobs if j.state == "TIMEOUT")
    assert timeout.time_limit_s is not None
    assert timeout.run_s > timeout.time_limit_s
    assert {j.user for j in jobs} == {"alice", "bob", "carol"}
    assert all(j.gpus >= 1 and j.cpus >= 1 and j.memory_mb > 0 for j in jobs)


@pytest.mark.parametrize("release", ["22.05", "24.11"])
def test_the_recording_on_its_own_cluster(release: str) -> None:
    folder = FIXTURES / f"rec-{release}"
    site = site_workload(
        read_site_jobs(folder / "sacct.json").jobs, load_snapshot(folder / "snapshot.json")
    )
    assert site.left_out == {MULTI_NODE: 8}
    assert len(site.jobs) == 114
    assert len(site.nodes) == 4
    assert sum(n.gpus for n in site.nodes) == 32
