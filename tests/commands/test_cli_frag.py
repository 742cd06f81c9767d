"""``slurm-defrag frag`` as a user runs it: a subprocess, its stdout, stderr and exit code.

A traceback means a bug (cli.py): bad input must give exactly one line on stderr that names
the file and the JSON path, and a non-zero exit.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    # A wide terminal so that rich does not wrap the words the tests look for.
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "slurm_defrag.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_json_output_has_the_documented_keys() -> None:
    out = run_cli("frag", "--snapshot", str(EXAMPLES / "course.json"), "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert list(report) == [
        "schema_version",
        "cluster",
        "taken_at",
        "mix",
        "cluster_metrics",
        "partitions",
        "models",
        "nodes",
        "pending",
        "topology_unknown",
        "topology_sources",
    ]
    assert report["topology_unknown"] == []  # a file snapshot states its topologies
    assert report["schema_version"] == 1
    assert report["taken_at"] == "2026-11-29T12:00:00Z"
    assert out.stderr == ""


def test_table_view_names_the_falsely_starved_job() -> None:
    out = run_cli("frag", "-s", str(EXAMPLES / "course.json"))
    assert out.returncode == 0, out.stderr
    assert "falsely-starved" in out.stdout
    pending_row = next(line for line in out.stdout.splitlines() if "falsely-starved" in line)
    assert "110" in pending_row  # the job id sits on the same table row as its status
    assert "GPU map" in out.stdout


def test_mixed_64_example_runs() -> None:
    path = str(EXAMPLES / "mixed-64.json")
    table = run_cli("frag", "-s", path)
    assert table.returncode == 0, table.stderr
    as_json = run_cli("frag", "-s", path, "--json")
    assert as_json.returncode == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    assert report["cluster_metrics"]["nodes"] == 64
    c = report["cluster_metrics"]["counts"]
    assert c["free"] + c["used"] == c["gpus"]


def test_declared_mix(tmp_path: Path) -> None:
    """``--mix FILE`` replaces the pending queue as the yardstick."""
    mix = tmp_path / "mix.json"
    mix.write_text(json.dumps({"items": [{"gpus_per_node": 2, "nvlink": True}]}))
    out = run_cli("frag", "-s", str(EXAMPLES / "course.json"), "--mix", str(mix), "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["mix"]["source"] == "declared"
    # a 2nv-job can use node01 {6,7}, node03 {0,7}, node04 {6,7}: 9 - 6 = 3 unusable
    assert report["cluster_metrics"]["counts"]["unusable"] == {
        "spatial": 1,
        "topology": 2,
        "configuration": 0,
    }


def _course() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / "course.json").read_text())
    return data


def _edited(edit: Any) -> str:
    data = copy.deepcopy(_course())
    edit(data)
    return json.dumps(data)


# (case, file content, JSON path or words the single error line must contain)
BAD_FILES = [
    (
        "wrong type",
        _edited(lambda d: d["nodes"][1].update(gpu_count="eight")),
        "nodes[1].gpu_count: Input should be a valid integer",
    ),
    ("missing required field", _edited(lambda d: d.pop("taken_at")), "taken_at: Field required"),
    (
        "unknown field",
        _edited(lambda d: d["jobs"][4].update(gpu="x")),
        "jobs[4].gpu: Extra inputs are not permitted",
    ),
    (
        "bad schema_version",
        _edited(lambda d: d.update(schema_version=7)),
        "schema_version: expected 1, found 7",
    ),
    ("invalid JSON", '{"schema_version": 1, "nodes": [', "not valid JSON at line 1"),
    (
        "job on unknown node",
        _edited(lambda d: d["jobs"][0].update(gpus={"node99": [0]})),
        "jobs[0].gpus: unknown node 'node99'",
    ),
    (
        "GPU index out of range",
        _edited(lambda d: d["jobs"][0].update(gpus={"node01": [0, 8]})),
        "jobs[0].gpus.node01: GPU index 8 outside 0..7",
    ),
    (
        "two jobs on one GPU",
        _edited(lambda d: d["jobs"][2].update(gpus={"node01": [3]})),
        "jobs[2].gpus.node01: GPU 3 also held by job 101",
    ),
]


@pytest.mark.parametrize(
    ("content", "expected"), [c[1:] for c in BAD_FILES], ids=[c[0] for c in BAD_FILES]
)
def test_bad_snapshot_gives_one_line(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    out = run_cli("frag", "-s", str(path))
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"slurm-defrag: error: {path}: ")
    assert expected in lines[0]
    assert out.stdout == ""


def test_missing_snapshot_file(tmp_path: Path) -> None:
    out = run_cli("frag", "-s", str(tmp_path / "nope.json"))
    assert out.returncode != 0
    assert out.stderr.strip() == f"slurm-defrag: error: {tmp_path / 'nope.json'}: no such file"
