"""Malformed Slurm output -> SlurmParseError that names the command and the field."""

from __future__ import annotations

import json
import logging
import re
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from slurm_defrag.slurm.failures import SlurmParseError


def altered(recordings: SimpleNamespace, version: str, name: str, change: Any) -> str:
    doc = json.loads(recordings.text(version, name))
    change(doc)
    return json.dumps(doc)


def job(doc: dict[str, Any], job_id: int) -> dict[str, Any]:
    return next(j for j in doc["jobs"] if j["job_id"] == job_id)


def node(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(n for n in doc["nodes"] if n["name"] == name)


# (version, command, file, change, the job that pays (None: left out), message fragment).
# Issue #40: a job record that does not read costs that job, never the read; the message
# naming the field is its ``unreadable`` reason (or, without an id or state, the reason it
# is left out of the snapshot).
JOB_CASES = [
    (
        "22.05",
        "squeue --json",
        "squeue_--json.json",
        lambda d: job(d, 8)["gres_detail"].pop(),
        "8",
        "gpu_allocation: squeue --json: jobs[7].gres_detail: 1 entries for 2 nodes",
    ),
    (
        "22.05",
        "squeue --json",
        "squeue_--json.json",
        lambda d: job(d, 3)["gres_detail"].__setitem__(0, "gpu:a100:2(IDX:0)"),
        "3",
        "gpu_allocation: squeue --json: jobs[2].gres_detail[0]: GPU count 2 does not match",
    ),
    (
        "24.11",
        "squeue --json",
        "squeue_--json.json",
        lambda d: job(d, 1).pop("job_state"),
        None,
        "state: squeue --json: jobs[0].job_state: missing",
    ),
    (
        "24.11",
        "squeue --json",
        "squeue_--json.json",
        lambda d: job(d, 1).__setitem__("job_state", ["SLEEPING"]),
        None,
        "state: squeue --json: jobs[0].job_state: unknown job state 'SLEEPING'",
    ),
    (
        "24.11",
        "squeue --json",
        "squeue_--json.json",
        lambda d: job(d, 2).__setitem__("priority", "high"),
        "2",
        "field: squeue --json: jobs[1].priority: expected a number, got str",
    ),
]

CASES = [
    # (version, command, file, change, expected message fragment): node documents
    (
        "22.05",
        "sinfo --json",
        "sinfo_--json.json",
        lambda d: node(d, "node02").__setitem__("gres_used", "gpu:a100:4(IDX:0-1,5-4)"),
        "sinfo --json: nodes[1].gres_used: descending GPU index range",
    ),
    (
        "24.11",
        "scontrol show nodes --json",
        "scontrol_show_nodes_--json.json",
        lambda d: node(d, "node03").__setitem__("gres", "gpu:a100-80g:8:9"),
        "scontrol show nodes --json: nodes[2].gres: cannot parse GRES item",
    ),
    (
        "24.11",
        "scontrol show nodes --json",
        "scontrol_show_nodes_--json.json",
        lambda d: node(d, "node01").__setitem__("gres_used", "gpu:a100:5(IDX:0-3,9)"),
        "scontrol show nodes --json: nodes[0]: gpus_used",
    ),
    (
        "24.11",
        "scontrol show nodes --json",
        "scontrol_show_nodes_--json.json",
        lambda d: d.pop("meta"),
        "scontrol show nodes --json: meta.plugin: missing",
    ),
]


@pytest.mark.parametrize(("version", "command", "file", "change", "message"), CASES)
def test_altered_json_names_the_field(recordings, version, command, file, change, message):  # type: ignore[no-untyped-def]
    runner = recordings.ReplayRunner(version, {command: altered(recordings, version, file, change)})
    with pytest.raises(SlurmParseError) as info:
        recordings.cli(version, runner, cross_check_text=False).snapshot()
    assert message in str(info.value)


@pytest.mark.parametrize(("version", "command", "file", "change", "job_id", "message"), JOB_CASES)
def test_altered_job_record_names_the_field_and_costs_that_job_only(  # type: ignore[no-untyped-def]
    recordings, version, command, file, change, job_id, message
):
    runner = recordings.ReplayRunner(version, {command: altered(recordings, version, file, change)})
    snap = recordings.cli(version, runner, cross_check_text=False).snapshot()
    if job_id is None:
        assert [r for r in snap.left_out if message in r], snap.left_out
    else:
        assert message in snap.job_by_id[job_id].unreadable
        assert snap.job_by_id[job_id].request is None
    others = [j for j in snap.jobs if j.id != job_id]
    assert len(others) == 9
    assert not any(j.unreadable for j in others)


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_truncated_json_names_command_and_position(recordings, version):  # type: ignore[no-untyped-def]
    text = recordings.text(version, "squeue_--json.json")
    runner = recordings.ReplayRunner(version, {"squeue --json": text[: len(text) // 2]})
    with pytest.raises(SlurmParseError, match=r"^squeue --json: output is not JSON \(line \d+"):
        recordings.cli(version, runner).snapshot()


def test_altered_text_names_the_field(recordings):  # type: ignore[no-untyped-def]
    text = recordings.text("22.05", "scontrol_show_reservation.txt")
    runner = recordings.ReplayRunner(
        "22.05",
        {
            "scontrol show reservation": text.replace(
                "StartTime=2026-11-29T15:13:23", "StartTime=soon"
            )
        },
    )
    with pytest.raises(SlurmParseError, match=r"reservations\[0\]\.StartTime: not a time: 'soon'"):
        recordings.cli("22.05", runner).snapshot()


def test_text_job_gres_is_checked(recordings, caplog):  # type: ignore[no-untyped-def]
    """A text record whose GPU indices do not read cannot be cross-checked: skipped with a
    warning naming the field (issue #40: it used to fail the read; the JSON's job 3 is read
    whole, and a real disagreement still fails, test_cross_check_catches_...)."""
    text = recordings.text("24.11", "scontrol_show_job_-d.txt")
    bad = text.replace("GRES=gpu:a100:2(IDX:0-1)\n", "GRES=gpu:a100:2(IDX:0-x)\n", 1)
    runner = recordings.ReplayRunner("24.11", {"scontrol show job -d": bad})
    with caplog.at_level(logging.WARNING):
        snap = recordings.cli("24.11", runner).snapshot()
    assert "job 3 not cross-checked: scontrol show job -d: jobs[2].Nodes[0].GRES" in caplog.text
    assert snap.job_by_id["3"].gpus == {"node02": frozenset({0, 1})}


def test_cross_check_catches_json_text_disagreement(recordings):  # type: ignore[no-untyped-def]
    """The JSON and the text disagree on job 4's GPUs: refuse the snapshot."""
    text = recordings.text("22.05", "scontrol_show_job_-d.txt")
    bad = text.replace("GRES=gpu:a100:2(IDX:4-5)", "GRES=gpu:a100:2(IDX:6-7)")
    runner = recordings.ReplayRunner("22.05", {"scontrol show job -d": bad})
    with pytest.raises(SlurmParseError, match=r"job 4: GPU indices node02:\[6, 7\] disagree"):
        recordings.cli("22.05", runner).snapshot()


def test_rest_malformed_response_names_endpoint_and_field(recordings):  # type: ignore[no-untyped-def]
    """Issue #40: named in job 8's ``unreadable`` reason; the read goes on."""
    doc = json.loads(recordings.text("24.11", "slurmrestd_GET_slurm_v0.0.42_jobs.json"))
    job(doc, 8)["gres_detail"] = "gpu:a100:2(IDX:0-1)"
    transport = recordings.rest_transport(
        "24.11", {"/slurm/v0.0.42/jobs": httpx.Response(200, json=doc)}
    )
    unreadable = recordings.rest("24.11", transport).snapshot().job_by_id["8"].unreadable
    assert re.fullmatch(
        r"gpu_allocation: GET /slurm/v0.0.42/jobs: jobs\[7\]\.gres_detail: expected a list.*",
        unreadable,
    )


def test_rest_non_json_body(recordings):  # type: ignore[no-untyped-def]
    transport = recordings.rest_transport(
        "22.05", {"/slurm/v0.0.38/nodes": httpx.Response(200, text="<html>proxy</html>")}
    )
    with pytest.raises(SlurmParseError, match=r"GET /slurm/v0\.0\.38/nodes: response is not JSON"):
        recordings.rest("22.05", transport).snapshot()


def test_pyslurm_layout_mismatch_names_the_field(recordings):  # type: ignore[no-untyped-def]
    module = recordings.pyslurm_module()
    jobs = module.Jobs.load()
    jobs[0]._layout = {"node01": {"gres": {"gpu:a100": {"count": 4, "indexes": "0-2"}}}}
    module.Jobs.load = lambda: jobs
    from slurm_defrag.slurm.pyslurm_adapter import PyslurmSlurm

    backend = PyslurmSlurm(recordings.settings("24.11"), module=module)
    snap = backend.snapshot()  # issue #40: job 1 pays, and its node's GPUs stay busy
    assert snap.job_by_id["1"].unreadable.startswith(
        "gpu_allocation: pyslurm: jobs[0].layout.node01.gres"
    )
    assert snap.node_by_name["node01"].gpus_used == frozenset(range(8))
