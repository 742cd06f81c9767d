"""pyslurm 25.11 (live-recorded dicts) maps to the same snapshot as the cli and rest backends.

Recorded on the compose s2511 cluster (Slurm 25.11.7 built from source, pyslurm 25.11.2
compiled against it; tests/fixtures/slurm-25.11/README.md): ``pyslurm-25.11_*.json`` are the
``to_dict(recursive=True)`` of every object plus each job's resource layout, and
``snapshot-{cli,rest,pyslurm}.json`` are ``slurm-defrag snapshot --json`` of that one state
by each backend, read live one after another.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from slurm_defrag.domain.cluster import JobState
from slurm_defrag.slurm.pyslurm_adapter import objects

VOLATILE = ("source", "taken_at")
NEWER_JOB_FIELDS = ("planned_start", "required_nodes", "excluded_nodes", "constraint")
"""Job fields added after the live snapshots were taken: left out of the comparison with
them (and checked on the mapping alone)."""


def recorded(recordings: SimpleNamespace, backend: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (recordings.dir("25.11") / f"snapshot-{backend}.json").read_text()
    )
    return {k: v for k, v in data.items() if k not in VOLATILE}


def mapped(recordings: SimpleNamespace) -> dict[str, Any]:
    snap = recordings.pyslurm("25.11").snapshot()
    assert snap.source == "pyslurm"
    data = {k: v for k, v in snap.model_dump(mode="json").items() if k not in VOLATILE}
    data["jobs"] = [
        {k: v for k, v in job.items() if k not in NEWER_JOB_FIELDS} for job in data["jobs"]
    ]
    return data


def test_live_cli_and_rest_snapshots_were_equal(recordings: SimpleNamespace) -> None:
    assert recorded(recordings, "cli") == recorded(recordings, "rest")


def test_pyslurm_dicts_map_to_the_live_pyslurm_snapshot(recordings: SimpleNamespace) -> None:
    assert mapped(recordings) == recorded(recordings, "pyslurm")


def test_pyslurm_equals_cli_except_partition_preempt_mode(recordings: SimpleNamespace) -> None:
    """pyslurm reports PreemptMode; scontrol/sinfo --json and slurmrestd v0.0.44 do not."""
    py, cli = mapped(recordings), recorded(recordings, "cli")
    assert [(p["name"], p["preempt_mode"]) for p in py["partitions"]] == [
        ("batch", "REQUEUE"),
        ("high", "OFF"),
    ]
    assert {**py, "partitions": cli["partitions"]} == cli
    gpus = {j["id"]: j["gpus"] for j in py["jobs"]}
    assert gpus["1"] == {"node01": [0, 1, 2, 3]}
    assert gpus["6"] == {"node01": [5, 6], "node02": [2, 3]}


def test_pending_job_planned_start(recordings: SimpleNamespace) -> None:
    """Job 8 waits for Resources: pyslurm's start_time is the plan (a year on, when the
    running jobs' 365-day limits end); held job 9 has none (start_time None)."""
    jobs = recordings.pyslurm("25.11").snapshot().job_by_id
    assert (jobs["8"].state, jobs["8"].start_time) == (JobState.PENDING, None)
    assert jobs["8"].planned_start == datetime(2027, 12, 3, 7, 37, 27, tzinfo=UTC)
    assert (jobs["9"].reason, jobs["9"].planned_start) == ("JobHeldUser", None)
    assert all(j.planned_start is None for j in jobs.values() if j.state != JobState.PENDING)


def test_loaded_collections_are_maps_of_objects() -> None:
    """pyslurm 25.11's ``Jobs.load()`` is a map: iterating it yields ids, not jobs."""
    job = SimpleNamespace(id=1)
    assert list(objects({1: job})) == [job]
    assert list(objects([job])) == [job]


def test_shards_without_a_gpu_index_make_the_node_busy(caplog: Any, monkeypatch: Any) -> None:
    """pyslurm 25.11.2 gives a job's shards as a count per node (``{"shard": 3}``, recorded
    on Slurm 25.11.7), never the GPU: every GPU of that node counts as busy, said once."""
    from slurm_defrag.slurm import pyslurm_adapter
    from slurm_defrag.slurm.pyslurm_adapter import parts_from as parts

    monkeypatch.setattr(pyslurm_adapter, "_warned_unplaced", set())

    def obj(d: dict[str, Any], layout: dict[str, Any] | None = None) -> SimpleNamespace:
        return SimpleNamespace(to_dict=lambda: d, get_resource_layout_per_node=lambda: layout)

    node = {"name": "node04", "state": "MIXED", "partitions": ["batch"],
            "configured_gres": {"gpu:h100": 8, "shard:h100": 32}}  # fmt: skip
    held = {"id": 5, "state": "RUNNING", "gres_per_node": {"gres/shard": 3}}
    asked = {"id": 6, "state": "PENDING", "gres_per_node": {"gres/shard": 2}}
    layout = {"node04": {"cpu_ids": "0", "gres": {"shard": 3}, "memory": None}}
    now = datetime(2026, 12, 6, tzinfo=UTC)
    for _ in range(2):
        got = parts([obj(node)], [obj(held, layout), obj(asked, {})], [], [], now)
    (n,) = got.nodes
    assert (n.shards, n.gpus_used) == (32, frozenset(range(8)))
    assert [(j.id, j.shards, j.shard_use) for j in got.jobs] == [("5", 3, ()), ("6", 2, ())]
    said = [r for r in caplog.records if "does not name" in r.getMessage()]
    assert len(said) == 1


def test_pending_job_node_limits(recordings: SimpleNamespace) -> None:
    """Job 8 was submitted with ``-w node01``: pyslurm's required_nodes; no --exclude, no
    --constraint (pyslurm gives ``None`` and ``[]``)."""
    job = recordings.pyslurm("25.11").snapshot().job_by_id["8"]
    assert (job.required_nodes, job.excluded_nodes, job.constraint) == ("node01", "", "")
