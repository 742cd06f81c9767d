"""The web page's JSON from a snapshot file, and ``slurm-defrag web``'s option checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infra import EXAMPLES
from slurm_defrag.cli import app
from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.metrics.compute import compute
from slurm_defrag.metrics.report import request_text
from slurm_defrag.web.pages import web_pages
from slurm_defrag.web.payload import snapshot_payload
from slurm_defrag.web.sources import FileSource


def test_map_cells_of_the_course_snapshot(course_snapshot: ClusterSnapshot) -> None:
    body = snapshot_payload(course_snapshot, compute(course_snapshot))
    cells = {n["name"]: [c["status"] for c in n["gpus"]] for n in body["nodes"]}
    assert list(cells) == ["node01", "node02", "node03", "node04"]
    assert all(len(c) == 8 for c in cells.values())
    # Same reading as the text map of `frag`: 9 free GPUs, none in a block of 3.
    free = [s for c in cells.values() for s in c if s in ("block", "stranded")]
    assert len(free) == body["summary"]["free"] == 9
    assert cells["node02"].count("stranded") == 1  # one free GPU alone is no block
    assert [n["largest_free_block"] for n in body["nodes"]] == [2, 1, 2, 2]
    node04 = body["nodes"][3]["gpus"]
    assert [c["gpu"] for c in node04 if c["switch_start"]] == [4]  # a PCIe switch boundary
    busy = {c["job"] for n in body["nodes"] for c in n["gpus"] if c["status"] == "busy"}
    assert busy == set(body["jobs"])
    (starving,) = body["starving"]
    assert (starving["job_id"], starving["user"], starving["reason"]) == ("110", "dave", "spatial")
    assert starving["request"] == "1x3 nvlink"
    # The same words as frag's and top's tables.
    assert starving["request"] == request_text(compute(course_snapshot).falsely_starved[0])
    assert "scattered" in starving["message"]


def test_unavailable_nodes_show_their_free_gpus_as_off(
    course_snapshot: ClusterSnapshot,
) -> None:
    nodes = list(course_snapshot.nodes)
    nodes[2] = nodes[2].model_copy(update={"state": frozenset({"DRAIN", "IDLE"})})
    snap = ClusterSnapshot.model_validate(
        {**course_snapshot.model_dump(), "nodes": [n.model_dump() for n in nodes]}
    )
    body = snapshot_payload(snap, compute(snap))
    node03 = body["nodes"][2]
    assert not node03["available"]
    assert {c["status"] for c in node03["gpus"]} == {"busy", "off"}


def test_a_snapshot_file_has_no_history_or_plans(course_snapshot: ClusterSnapshot) -> None:
    pages = web_pages(FileSource(course_snapshot, EXAMPLES / "course.json"))
    snap = json.loads(pages["/api/snapshot"]({}).body)
    assert snap["origin"] == f"snapshot file {EXAMPLES / 'course.json'}"
    assert snap["taken_at"] == "2026-11-29T12:00:00+00:00"  # ISO with the T, for Date()
    hist = json.loads(pages["/api/history"]({"since": ["12h"]}).body)
    assert hist["series"] == []
    assert "no history" in hist["note"]
    plans = json.loads(pages["/api/plans"]({}).body)
    assert plans["plans"] == []
    assert "no plans" in plans["note"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--snapshot", "x.json", "--db", "sqlite:////tmp/x.db"], "not both"),
        (["--snapshot", "missing.json"], "missing.json: no such file"),
        (
            ["--snapshot", str(EXAMPLES / "course.json"), "--allow", "10.0.0.0/33"],
            "--allow: '10.0.0.0/33' is not a network",
        ),
        (["--db", "sqlite:////nonexistent-dir/x.db"], "does not exist"),
    ],
)
def test_web_command_rejects_bad_options(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["web", *args])
    assert result.exit_code != 0
    assert isinstance(result.exception, Exception)
    assert message in str(result.exception)


def test_jobs_sharing_a_node_have_different_colours() -> None:
    """Issue #45: 292 and 429 are two ids the page's old hash coloured exactly alike
    (hsl(335, 64%, 39%)); on one node they looked like one job."""
    from builders import node, running, snapshot

    snap = snapshot(
        [node("n1"), node("n2")],
        [running("292", {"n1": [0, 1]}), running("429", {"n1": [2, 3]}),
         running("500", {"n2": [0]})],
    )  # fmt: skip
    jobs = snapshot_payload(snap, compute(snap))["jobs"]
    assert jobs["292"]["colour"] != jobs["429"]["colour"]
    assert all(j["colour"].startswith("hsl(") for j in jobs.values())
