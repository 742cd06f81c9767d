"""The shared mapping helpers, table-driven."""

from __future__ import annotations

import pytest

from slurm_defrag.domain.cluster import JobState, NodeFlag
from slurm_defrag.slurm.failures import SlurmParseError
from slurm_defrag.slurm.parse import mapping as m
from slurm_defrag.slurm.parse.scontrol_text import parse_line, parse_records


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"per_node": "gres:gpu:4"}, (1, 4, None, None, True)),  # 22.05 spelling
        ({"per_node": "gres/gpu:a100:2", "nodes": 3}, (3, 2, None, "a100", True)),  # 24.11
        ({"per_job": "gres/gpu=8"}, (1, None, 8, None, True)),  # --gpus=8, one node: fixed
        ({"per_job": "gres:gpu:8", "nodes": 2}, (2, None, 8, None, False)),  # spreadable
        ({"per_task": "gres/gpu:1", "tasks": 4}, (1, None, 4, None, True)),  # --gpus-per-task
        ({"per_node": "gres/gpu:1"}, (1, 1, None, None, False)),
        ({"per_node": "gres/gpu:16"}, (1, 16, None, None, False)),  # > 8: no single island
        ({"per_node": "gres/gpu:4", "comment": "ckpt defrag:nvlink=0"}, (1, 4, None, None, False)),
        ({"per_node": "gres/gpu:1", "admin_comment": "defrag:nvlink=1"}, (1, 1, None, None, True)),
        # admin comment wins over the user's comment
        (
            {
                "per_node": "gres/gpu:4",
                "admin_comment": "x;defrag:nvlink=no",
                "comment": "defrag:nvlink=4",
            },
            (1, 4, None, None, False),
        ),
        ({"per_node": "gres/gpu:2,gres/shard:1"}, (1, 2, None, None, True)),
    ],
)
def test_gpu_request(kwargs, expected) -> None:  # type: ignore[no-untyped-def]
    req = m.gpu_request(where="t", path="jobs[0]", **kwargs)
    assert req is not None
    assert (req.nodes, req.gpus_per_node, req.total_gpus, req.gpu_model, req.nvlink) == expected


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"per_node": "gres/shard:2"}, {"per_node": "gres/gpu:32"}, {"per_node": "(null)"}],
)
def test_no_gpu_request(kwargs) -> None:  # type: ignore[no-untyped-def]
    assert m.gpu_request(where="t", path="jobs[0]", **kwargs) is None


def test_exclusive_request_wants_whole_nodes() -> None:
    req = m.gpu_request(where="t", path="j", per_node="gres/gpu:8", exclusive=True)
    assert req is not None
    assert req.whole_node


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["idle", "DRAIN"], {NodeFlag.IDLE, NodeFlag.DRAIN}),  # 22.05 state + state_flags
        (["IDLE+RESERVED"], {NodeFlag.IDLE, NodeFlag.RESERVED}),  # text
        (["MIXED", "DRAIN", "DYNAMIC_NORM"], {NodeFlag.MIXED, NodeFlag.DRAIN}),  # unknown dropped
        (["DOWN*+NOT_RESPONDING"], {NodeFlag.DOWN, NodeFlag.NOT_RESPONDING}),
        (
            ["IDLE", "POWERING_DOWN", "INVALID_REG"],
            {NodeFlag.IDLE, NodeFlag.POWERED_DOWN, NodeFlag.INVAL},
        ),
        ([], {NodeFlag.UNKNOWN}),
    ],
)
def test_node_flags(words, expected) -> None:  # type: ignore[no-untyped-def]
    assert m.node_flags(words) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("RUNNING", JobState.RUNNING),
        (["PENDING"], JobState.PENDING),
        (["COMPLETED", "COMPLETING"], JobState.COMPLETING),
        (["RUNNING", "CONFIGURING"], JobState.RUNNING),
    ],
)
def test_job_state(value, expected) -> None:  # type: ignore[no-untyped-def]
    assert m.job_state(value, "w", "f") == expected


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("365-00:00:00", 365 * 86400),
        ("01:30:00", 5400),
        ("30:00", 1800),
        ("45", 2700),
        ("2-12", 2 * 86400 + 12 * 3600),
        ("1-02:03", 93780),
        ("UNLIMITED", None),
        ("N/A", None),
    ],
)
def test_duration(text, seconds) -> None:  # type: ignore[no-untyped-def]
    assert m.duration_s(text, "w", "f") == seconds


def test_duration_garbage_names_field() -> None:
    with pytest.raises(SlurmParseError, match=r"w: jobs\[1\]\.TimeLimit: not a duration"):
        m.duration_s("soon", "w", "jobs[1].TimeLimit")


def test_number_objects_and_ids() -> None:
    assert m.number({"set": True, "infinite": False, "number": 7}, "w", "f") == 7
    assert m.number({"set": False, "infinite": True, "number": 0}, "w", "f") is None
    assert m.job_id(130, 120, 3, None, None) == "120_3"
    assert m.job_id(201, None, None, 200, 1) == "200+1"
    assert m.job_id(200, 0, None, 200, 0) == "200"


def test_text_free_text_and_continuations() -> None:
    assert parse_line("   Reason=demo: GPU maintenance [root@2026-11-29T15:13:23]") == {
        "Reason": "demo: GPU maintenance [root@2026-11-29T15:13:23]"
    }
    # a job's Reason= is not free text when it does not start the line
    assert parse_line("   JobState=PENDING Reason=Resources Dependency=(null)") == {
        "JobState": "PENDING",
        "Reason": "Resources",
        "Dependency": "(null)",
    }
    assert parse_line("   OS=Linux 6.1 #1 SMP @0 ")["OS"] == "Linux 6.1 #1 SMP @0"
    assert m.strip_reason_stamp("demo: GPU maintenance [root@2026-11-29T15:13:23]") == (
        "demo: GPU maintenance"
    )


def test_text_records_keep_job_detail_lines_apart() -> None:
    text = (
        "JobId=8 JobName=x\n   JOB_GRES=gpu:a100:4\n"
        "     Nodes=node[05-06] CPU_IDs=0 Mem=0 GRES=gpu:a100:2(IDX:0-1)\n"
        "   Comment=defrag:nvlink=0 keep it\n   \n\n"
        "JobId=9 JobName=y\n"
    )
    first, second = parse_records(text)
    assert first.details == [
        {"Nodes": "node[05-06]", "CPU_IDs": "0", "Mem": "0", "GRES": "gpu:a100:2(IDX:0-1)"}
    ]
    assert first.fields["Comment"] == "defrag:nvlink=0 keep it"
    assert second.fields["JobId"] == "9"
    assert parse_records("No jobs in the system\n") == []
