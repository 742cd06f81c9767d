"""A job's own placement limits (``-w``, ``-x``, ``--constraint``) in every reader.

The recordings hold ``-w`` (ReqNodeList / required_nodes) on most jobs and no ``-x`` or
``--constraint``; those are edited in, in each spelling: scontrol text (``(null)`` when
unset), the v0.0.38 and v0.0.42 JSON (``""`` when unset), pyslurm (``None`` and a list
split at the commas). The values are user input: kept as text, read by the planner.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from slurm_defrag.domain.cluster import Job
from slurm_defrag.slurm.parse import openapi, scontrol_text
from slurm_defrag.slurm.parse.mapping import Doc
from slurm_defrag.slurm.pyslurm_adapter import job as pyslurm_job

VERSIONS = ("22.05", "24.11")


def limits(job: Job | None) -> tuple[str, str, str]:
    assert job is not None
    return job.required_nodes, job.excluded_nodes, job.constraint


def text_job(recordings: SimpleNamespace, version: str, job_id: str, **subs: str) -> Job:
    text = recordings.text(version, "scontrol_show_job_-d.txt")
    start = text.index(f"JobId={job_id} ")
    record = text[start : text.find("\n\n", start)]
    for key, value in subs.items():
        old = next(w for w in record.split() if w.startswith(f"{key}="))
        record = record.replace(old, f"{key}={value}", 1)
    (job,) = scontrol_text.jobs(record, "scontrol show job -d")
    return job


@pytest.mark.parametrize("version", VERSIONS)
def test_text(recordings: SimpleNamespace, version: str) -> None:
    assert limits(text_job(recordings, version, "9")) == ("", "", "")
    assert limits(text_job(recordings, version, "1")) == ("node01", "", "")
    edited = text_job(recordings, version, "9", ExcNodeList="node[01-03]", Features="nvlink&big|x")
    assert limits(edited) == ("", "node[01-03]", "nvlink&big|x")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_feature_called_unknown_is_a_feature(recordings: SimpleNamespace, version: str) -> None:
    """Only Slurm's "(null)" means unset here, not the other spellings of "no value"."""
    edited = text_job(recordings, version, "9", Features="Unknown", ExcNodeList="None")
    assert limits(edited) == ("", "None", "Unknown")


@pytest.mark.parametrize("version", VERSIONS)
def test_json(recordings: SimpleNamespace, version: str) -> None:
    path = recordings.dir(version) / "squeue_--json.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    by_id = {str(j["job_id"]): j for j in data["jobs"]}
    by_id["9"].update(excluded_nodes="node[01-03]", features="nvlink&big")
    fam = openapi.family(data, "squeue --json")
    jobs = {j.id: j for j in fam.jobs(Doc(data, "squeue --json", ""))}
    assert limits(jobs["1"]) == ("node01", "", "")
    assert limits(jobs["9"]) == ("", "node[01-03]", "nvlink&big")
    assert limits(jobs["10"]) == ("", "", "")


def test_pyslurm(recordings: SimpleNamespace) -> None:
    path = recordings.dir("24.11") / "pyslurm-24.11_jobs.json"
    jobs = json.loads(path.read_text(encoding="utf-8"))
    assert limits(pyslurm_job(Doc(jobs["9"], "pyslurm", "jobs[8]"), {})) == ("", "", "")
    jobs["9"].update(excluded_nodes="node[01-03]", constraints=["nvlink", "big|x"])
    edited = pyslurm_job(Doc(jobs["9"], "pyslurm", "jobs[8]"), {})
    assert limits(edited) == ("", "node[01-03]", "nvlink,big|x")


def test_pyslurm_constraints_of_another_type_name_the_field(recordings: SimpleNamespace) -> None:
    path = recordings.dir("24.11") / "pyslurm-24.11_jobs.json"
    jobs = json.loads(path.read_text(encoding="utf-8"))
    jobs["9"]["constraints"] = 7
    with pytest.raises(Exception, match="constraints"):
        pyslurm_job(Doc(jobs["9"], "pyslurm", "jobs[8]"), {})
