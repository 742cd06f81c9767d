"""Snapshot files: loading, the one-line errors a person can act on, and the JSON round trip.

Every bad-input case asserts the message names the file and the JSON path of the problem
(docs/snapshot-format.md): that is what lets someone fix a snapshot without a debugger.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from slurm_defrag.domain.cluster import UNKNOWN_OWNER, ClusterSnapshot, NodeFlag
from slurm_defrag.errors import InputError
from slurm_defrag.snapshot_file import (
    dump_snapshot,
    load_snapshot,
    parse_snapshot,
    save_snapshot,
)
from slurm_defrag.synth import course_scenario, random_cluster

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def course_data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / "course.json").read_text())
    return data


def test_course_example_is_the_synth_scenario(course_snapshot: ClusterSnapshot) -> None:
    """examples/course.json is written from synth.course_scenario(): they must not drift."""
    assert course_snapshot == course_scenario()


def test_example_files_are_stable_dumps(course_snapshot: ClusterSnapshot) -> None:
    """The committed file is exactly what dump_snapshot writes (diffable, stable keys)."""
    assert (EXAMPLES / "course.json").read_text() == dump_snapshot(course_snapshot) + "\n"


@pytest.mark.parametrize(
    "snap", [course_scenario(), random_cluster(24, seed=5, pending=6)], ids=["course", "random-24"]
)
def test_round_trip(snap: ClusterSnapshot, tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    save_snapshot(snap, path)
    loaded = load_snapshot(path)
    assert loaded == snap
    assert dump_snapshot(loaded) == dump_snapshot(snap)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """An edit of the course data: set ``a.b[2].c`` to value (``DELETE`` removes it)."""

    def edit(data: dict[str, Any]) -> None:
        parts = path.replace("[", ".").replace("]", "").split(".")
        target: Any = data
        for p in parts[:-1]:
            target = target[int(p)] if p.isdigit() else target[p]
        last = parts[-1]
        if value is DELETE:
            del target[last]
        else:
            target[int(last) if last.isdigit() else last] = value

    return edit


DELETE = object()

# (case id, edit of the course data, JSON path the message must name, words it must contain)
BAD_DATA = [
    ("wrong type", _set("nodes[1].gpu_count", "eight"), "nodes[1].gpu_count", "integer"),
    ("missing field", _set("taken_at", DELETE), "taken_at", "Field required"),
    ("missing job state", _set("jobs[3].state", DELETE), "jobs[3].state", "Field required"),
    ("unknown field", _set("nodes[2].colour", "red"), "nodes[2].colour", "Extra inputs"),
    ("unknown top-level field", _set("nodez", []), "nodez", "Extra inputs"),
    ("schema_version 2", _set("schema_version", 2), "schema_version", "newer slurm-defrag"),
    ("schema_version string", _set("schema_version", "1"), "schema_version", "expected 1"),
    ("schema_version missing", _set("schema_version", DELETE), "schema_version", "expected 1"),
    (
        "unknown node",
        _set("jobs[0].gpus", {"node99": [0]}),
        "jobs[0].gpus",
        "unknown node 'node99'",
    ),
    (
        "GPU index out of range",
        _set("jobs[0].gpus", {"node01": [8]}),
        "jobs[0].gpus.node01",
        "GPU index 8 outside 0..7",
    ),
    # job 103 (node02 GPU 0) moved onto node01 GPU 3, which job 101 holds
    (
        "two jobs on one GPU",
        _set("jobs[2].gpus", {"node01": [3]}),
        "jobs[2].gpus.node01",
        "GPU 3 also held by job 101",
    ),
    (
        "gpus_used out of range",
        _set("nodes[0].gpus_used", [9]),
        "nodes[0].gpus_used",
        "index 9 outside 0..7",
    ),
    (
        "unknown topology",
        _set("nodes[0].topology", "nvswitch-9"),
        "nodes[0].topology",
        "unknown topology",
    ),
    (
        "topology size mismatch",
        _set("nodes[0].topology", "nvswitch-4"),
        "nodes[0].topology",
        "has 4 GPUs",
    ),
    ("duplicate node", _set("nodes[1].name", "node01"), "nodes[1].name", "duplicate node"),
    ("duplicate job", _set("jobs[1].id", "101"), "jobs[1].id", "duplicate job"),
    ("bad request", _set("jobs[9].request", {"nodes": 1}), "jobs[9].request", "exactly one"),
    (
        "bad custom topology",
        _set("topologies", {"t": {"name": "t", "gpu_count": 2, "nvlinks": [[0, 5]]}}),
        "topologies.t.nvlinks[0]",
        "out of range",
    ),
    (
        "negative time limit",
        _set("jobs[0].time_limit_s", -5),
        "jobs[0].time_limit_s",
        "greater than or equal to 0",
    ),
    # issue #40: a job a reader could not read whole (see test_unreadable_jobs_round_trip)
    ("unreadable of no part", _set("jobs[0].unreadable", "oops"), "jobs[0].unreadable", "part"),
    (
        "unreadable of an unknown part",
        _set("jobs[0].unreadable", "mood: bad"),
        "jobs[0].unreadable",
        "unknown part 'mood'",
    ),
    (
        "unreadable over two lines",
        _set("jobs[0].unreadable", "time: a\nb"),
        "jobs[0].unreadable",
        "control characters escaped",
    ),
    (
        "unreadable and no id",
        _set("jobs[0].unreadable", "job_id: w: jobs[0].job_id: not a job id"),
        "jobs[0].unreadable",
        "left out, not kept",
    ),
    (
        "unreadable with a request",
        _set("jobs[9].unreadable", "time: w: jobs[9].submit_time: out of range"),
        "jobs[9].request",
        "asks for nothing",
    ),
    (
        "left out of a kept part",
        _set("left_out", ["time: w: jobs[3].submit_time: out of range"]),
        "left_out",
        "[0]: a record with a readable id and state is kept",
    ),
]


@pytest.mark.parametrize(
    ("edit", "json_path", "words"), [c[1:] for c in BAD_DATA], ids=[c[0] for c in BAD_DATA]
)
def test_bad_snapshot_data(
    course_data: dict[str, Any], edit: Callable[[dict[str, Any]], None], json_path: str, words: str
) -> None:
    data = copy.deepcopy(course_data)
    edit(data)
    with pytest.raises(InputError) as err:
        parse_snapshot(data, "bad.json")
    message = str(err.value)
    assert message.startswith(f"bad.json: {json_path}: "), message
    assert words in message
    assert "\n" not in message
    assert "(top level)" not in message  # a path that exists must be named, not "top level"


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b'{"schema_version": 1,\n "nodes": [}', "not valid JSON at line 2 column 12"),
        (b"", "not valid JSON at line 1 column 1"),
        (b"[]", "(top level): expected a JSON object"),
        (b"\xff\xfe{}", "not UTF-8"),  # once a UnicodeDecodeError traceback
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),  # once a RecursionError
    ],
    ids=["invalid JSON", "empty file", "not an object", "not UTF-8", "deep nesting"],
)
def test_unreadable_files(tmp_path: Path, content: bytes, words: str) -> None:
    path = tmp_path / "snap.json"
    path.write_bytes(content)
    with pytest.raises(InputError) as err:
        load_snapshot(path)
    assert str(err.value).startswith(f"{path}: ")
    assert words in str(err.value)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_snapshot(tmp_path / "nope.json")
    with pytest.raises(InputError, match="cannot read"):
        load_snapshot(tmp_path)


def test_many_errors_stay_on_one_line(course_data: dict[str, Any]) -> None:
    """Several problems: the first in full, the count and a few more on the same line."""
    data = copy.deepcopy(course_data)
    data["nodes"][0]["gpu_count"] = "x"
    data["nodes"][1]["gpu_count"] = "y"
    data["nodes"][2]["colour"] = "red"
    with pytest.raises(InputError) as err:
        parse_snapshot(data, "bad.json")
    message = str(err.value)
    assert message.startswith("bad.json: nodes[0].gpu_count: ")
    assert "(and 2 more: " in message
    assert "nodes[2].colour" in message
    assert "\n" not in message


def test_node_state_spellings(course_data: dict[str, Any]) -> None:
    """Slurm prints ``IDLE+DRAIN`` and suffixes like ``*`` (not responding); both load."""
    data = copy.deepcopy(course_data)
    data["nodes"][0]["state"] = "idle+drain"
    data["nodes"][1]["state"] = ["MIXED*"]
    snap = parse_snapshot(data)
    assert snap.nodes[0].state == {NodeFlag.IDLE, NodeFlag.DRAIN}
    assert snap.nodes[1].state == {NodeFlag.MIXED}
    assert not snap.nodes[0].available
    assert snap.nodes[1].available


def test_busy_gpu_without_a_visible_job_stays_busy(course_data: dict[str, Any]) -> None:
    """GresUsed lists GPU 7 of node01 but no job holds it: owned by "?", not free."""
    data = copy.deepcopy(course_data)
    data["nodes"][0]["gpus_used"] = [0, 1, 2, 3, 4, 5, 7]
    snap = parse_snapshot(data)
    assert snap.gpu_owners["node01"] == ("101",) * 4 + ("104", "104", None, UNKNOWN_OWNER)
    assert snap.free_masks["node01"] == 1 << 6


def test_finished_jobs_hold_no_gpus(course_snapshot: ClusterSnapshot) -> None:
    """Job 102 is COMPLETED: its node01 GPU 6 and node03 GPU 0 are free again."""
    assert course_snapshot.gpu_owners["node01"][6] is None
    assert course_snapshot.gpu_owners["node03"][0] is None


def test_node_without_topology_is_pcie_only(course_data: dict[str, Any]) -> None:
    data = copy.deepcopy(course_data)
    data["nodes"][0]["topology"] = None
    snap = parse_snapshot(data)
    topo = snap.topology_of(snap.nodes[0])
    assert topo.gpu_count == 8
    assert topo.nvlinks == ()
    assert topo.max_block == 1


def test_custom_topology_by_name(course_data: dict[str, Any]) -> None:
    data = copy.deepcopy(course_data)
    data["topologies"] = {
        "ring-8": {
            "name": "ring-8",
            "gpu_count": 8,
            "nvlinks": [[i, (i + 1) % 8] for i in range(8)],
        }
    }
    data["nodes"][3]["topology"] = "ring-8"
    snap = parse_snapshot(data)
    assert snap.topology_of(snap.nodes[3]).name == "ring-8"
    assert parse_snapshot(json.loads(dump_snapshot(snap))) == snap


# -- hostile input (issue 15) -----------------------------------------------------------


def _course_dict() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / "course.json").read_text())
    return data


def _naive(stamp: str) -> str:
    return stamp.removesuffix("Z").split("+")[0]


@pytest.mark.parametrize("where", ["taken_at", "jobs"])
def test_naive_timestamps_are_one_line_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """Defect: a snapshot with times without a time zone (taken_at, or job times) made
    ``plan`` crash: "can't subtract offset-naive and offset-aware datetimes"."""
    from cli_run import assert_one_line_error

    data = _course_dict()
    if where == "taken_at":
        data["taken_at"] = _naive(data["taken_at"])
        key = "taken_at"
    else:
        for job in data["jobs"]:
            for k in ("submit_time", "start_time"):
                if job.get(k):
                    job[k] = _naive(job[k])
        key = "jobs[0].submit_time"
    path = tmp_path / "naive.json"
    path.write_text(json.dumps(data))
    assert_one_line_error(
        capsys, "plan", "-s", str(path), words=(str(path), key, "without a time zone")
    )


@pytest.mark.parametrize(
    "stamp", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "1969-06-01T00:00:00Z"]
)
def test_timestamps_outside_the_supported_years(stamp: str) -> None:
    """Year 1 at +14:00 overflows the UTC conversion (OverflowError); bounded at load."""
    data = _course_dict()
    data["taken_at"] = stamp
    with pytest.raises(InputError, match="taken_at: timestamp outside the years"):
        parse_snapshot(data)


def test_deep_json_snapshot_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cli_run import assert_one_line_error

    path = tmp_path / "deep.json"
    path.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    assert_one_line_error(capsys, "frag", "-s", str(path), words=("nested too deeply",))
    shallow = _course_dict()
    shallow["nodes"][0]["partitions"] = json.loads("[" * 500 + "]" * 500)
    path.write_text(json.dumps(shallow))
    assert_one_line_error(capsys, "frag", "-s", str(path), words=("nodes[0].partitions",))


def test_integer_beyond_pythons_digit_limit_is_one_line(tmp_path: Path) -> None:
    """Defect (found by the fuzz tests): a 5,000-digit number made json.loads raise a plain
    ValueError (Python's int string limit), a traceback."""
    path = tmp_path / "big.json"
    path.write_text('{"schema_version": ' + "9" * 5000 + "}")
    with pytest.raises(InputError, match=r"big\.json: not valid JSON: an integer with too many"):
        load_snapshot(path)


def test_odd_keys_stay_on_one_line() -> None:
    """Defect (found by the fuzz tests): an unknown key holding a line break made a two-line
    message."""
    data = _course_dict()
    data["a\nb"] = 1
    with pytest.raises(InputError) as err:
        parse_snapshot(data)
    assert "\n" not in str(err.value)
    assert "a\\nb" in str(err.value)


def test_unreadable_jobs_round_trip(course_data: dict[str, Any]) -> None:
    """Issue #40: ``unreadable`` (a kept job) and ``left_out`` (records without an id or
    state) are in the JSON only when set, so every earlier file loads and dumps unchanged."""
    data = copy.deepcopy(course_data)
    reason = "gres_request: squeue --json: jobs[9].tres_per_node: cannot parse GRES item 'x'"
    left = "state: squeue --json: jobs[10].job_state: unknown job state 'SLEEPING' (job 111)"
    data["jobs"][9].update(unreadable=reason, request=None)
    data["left_out"] = [left]
    snap = parse_snapshot(data)
    job = snap.job_by_id["110"]
    assert (job.unreadable, job.unreadable_part, job.request) == (reason, "gres_request", None)
    assert snap.left_out == (left,)
    assert snap.unreadable_parts() == {"gres_request": 1, "state": 1}
    assert parse_snapshot(json.loads(dump_snapshot(snap))) == snap
    plain = parse_snapshot(copy.deepcopy(course_data))
    assert plain.unreadable_parts() == {}
    assert "unreadable" not in dump_snapshot(plain)
    assert "left_out" not in dump_snapshot(plain)


def test_an_unreadable_reason_is_one_bounded_line() -> None:
    from slurm_defrag.domain.cluster import MAX_REASON, RecordPart, reason_part, record_reason

    reason = record_reason(RecordPart.TIME, "x\n\x1b[31m\u202e" + "y" * 1000)
    assert reason.startswith("time: x\\n\\x1b[31m\\u202e")
    assert len(reason) == len("time: ") + MAX_REASON
    assert reason_part(reason) == RecordPart.TIME
