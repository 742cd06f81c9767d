"""A site's accounting read for ``simulate --workload sacct:FILE`` (slurm/parse/sacct.py,
``read_site_jobs``): the ``-P`` text form and ``--json`` of Slurm 22.05 and 24.11."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from infra import ROOT
from slurm_defrag.domain.accounting import SiteJob
from slurm_defrag.errors import InputError
from slurm_defrag.slurm.parse.sacct import parse_site_json, parse_site_text, read_site_jobs

FIXTURES = ROOT / "tests" / "fixtures" / "sacct"


def t(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def by_id(jobs: list[SiteJob]) -> dict[str, SiteJob]:
    return {j.job_id: j for j in jobs}


def test_the_text_form_jobs_arrays_requeued_multi_node_and_what_is_skipped() -> None:
    read = read_site_jobs(FIXTURES / "site.txt")
    jobs = by_id(read.jobs)
    assert list(jobs) == ["100", "101", "102_1", "102_2", "103", "104", "109", "111"]
    assert jobs["100"] == SiteJob(
        "100", t("2026-12-01T10:00:00"), t("2026-12-01T10:00:05"), 3600.0, 7200.0,
        nodes=1, cpus=8, memory_mb=65536, gpus=4, gpu_model=None,  # typed only in AllocTRES
        user="alice", account="ml", partition="gpu", qos="normal", state="COMPLETED",
    )  # fmt: skip
    timeout = jobs["101"]
    assert (timeout.state, timeout.run_s, timeout.time_limit_s) == ("TIMEOUT", 3603.0, 3600.0)
    assert timeout.gpu_model == "h100"  # ReqTRES gres/gpu:h100=2: the type was asked for
    assert jobs["102_2"].state == "FAILED"  # array tasks are jobs of their own
    requeued = jobs["103"]  # the first record's submit, the last record's run
    assert requeued.runs == 2
    assert requeued.submit_t == t("2026-12-01T10:30:00")
    assert (requeued.start_t, requeued.run_s) == (t("2026-12-01T11:00:00"), 7200.0)
    assert (jobs["104"].nodes, jobs["104"].gpus) == (2, 16)  # kept; the simulator decides
    assert (jobs["109"].gpus, jobs["109"].memory_mb) == (0, 8192)  # ReqMem 4Gc x 2 CPUs
    assert read.records == 16
    assert read.skipped == {
        "job steps": 1,
        "bad records": 3,
        "never started": 1,  # the pending array tasks 102_[3-5]
        "cancelled before start": 1,
        "earlier runs of requeued jobs": 1,
        "still running": 1,
    }


def test_every_bad_row_is_one_line_naming_the_line_the_job_and_the_field() -> None:
    read = read_site_jobs(FIXTURES / "site.txt")
    where = str(FIXTURES / "site.txt")
    assert read.problems == [
        f"{where}: line 13 (job 107): Submit: 'yesterday' is not a time like 2026-12-01T14:00:00",
        f"{where}: line 14 (job 108): line: 8 fields, the header has 19 (a JobName with '|' "
        "in it? leave JobName out)",
        f"{where}: line 16 (job 110): Elapsed: 'ab:cd' is not a duration like 1-02:03:04",
    ]


@pytest.mark.parametrize("release", ["22.05", "24.11"])
def test_the_json_form_of_both_releases_reads_the_same_jobs(release: str) -> None:
    read = read_site_jobs(FIXTURES / f"site-{release}.json")
    jobs = by_id(read.jobs)
    assert list(jobs) == ["200", "201", "202_1", "204", "205"]
    assert jobs["200"] == SiteJob(
        "200", t("2026-12-01T10:00:00"), t("2026-12-01T10:00:10"), 3600.0, 7200.0,
        nodes=1, cpus=8, memory_mb=65536, gpus=4, user="alice", account="ml",
        partition="gpu", qos="normal", state="COMPLETED",
    )  # fmt: skip
    assert (jobs["201"].state, jobs["201"].gpu_model, jobs["201"].time_limit_s) == (
        "TIMEOUT",
        "h100",
        1800.0,
    )
    assert (jobs["204"].runs, jobs["204"].submit_t) == (2, t("2026-12-01T10:20:00"))
    assert jobs["205"].nodes == 2
    assert read.skipped == {
        "bad records": 1,
        "earlier runs of requeued jobs": 1,
        "cancelled before start": 1,
        "still running": 1,
    }
    field = "time.submission" if release == "22.05" else "tres.allocated[0].count"
    [problem] = read.problems
    assert problem.startswith(f"{FIXTURES / f'site-{release}.json'}: jobs[8] (job 208): {field}: ")


def test_an_unlimited_time_limit_and_het_components() -> None:
    text = (
        "JobID|Submit|Start|End|Elapsed|Timelimit|AllocTRES\n"
        "7+0|2026-12-01T10:00:00|2026-12-01T10:00:00|2026-12-01T10:01:00||UNLIMITED|"
        "cpu=1,gres/gpu=1\n"
    )
    [job] = parse_site_text(text.splitlines()).jobs
    assert (job.job_id, job.run_s, job.time_limit_s, job.gpus) == ("7+0", 60.0, None, 1)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", ("empty",)),
        ("JobID|Start|End\n", ("line 1", "submit")),
        ("JobID|Submit|Start\n", ("line 1", "neither End nor Elapsed")),
    ],
)
def test_a_text_file_that_cannot_be_read_at_all_is_one_error(
    text: str, words: tuple[str, ...]
) -> None:
    with pytest.raises(InputError) as err:
        parse_site_text(text.splitlines(), "s.txt")
    assert str(err.value).startswith("s.txt: ")
    for word in words:
        assert word in str(err.value)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"jobs": [', ("not valid JSON", "line 1")),
        ('{"meta": {}}', ("expected an object with a jobs list",)),
        ("[1, 2]", ("expected an object with a jobs list",)),
    ],
)
def test_a_json_file_that_cannot_be_read_at_all_is_one_error(
    text: str, words: tuple[str, ...]
) -> None:
    with pytest.raises(InputError) as err:
        parse_site_json(text, "s.json")
    for word in ("s.json", *words):
        assert word in str(err.value)


def test_a_json_job_that_is_not_an_object_is_a_bad_record() -> None:
    read = parse_site_json('{"jobs": [3, {"job_id": "x"}]}', "s.json")
    assert read.jobs == []
    assert read.problems == [
        "s.json: jobs[0]: record: expected an object, got int",
        "s.json: jobs[1]: job_id: expected a number, got str",
    ]


def test_a_missing_file_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nope\.txt: cannot read"):
        read_site_jobs(tmp_path / "nope.txt")
