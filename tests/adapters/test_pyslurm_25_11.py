"""pyslurm 25.11 (live-recorded dicts) maps to the same snapshot as the cli and rest backends.

Recorded on the compose s2511 cluster (Slurm 25.11.7 built from source, pyslurm 25.11.2
compiled against it; tests/fixtures/slurm-25.11/README.md): ``pyslurm-25.11_*.json`` are the
``to_dict(recursive=True)`` of every object plus each job's resource layout, and
``snapshot-{cli,rest,pyslurm}.json`` are ``slurm-defrag snapshot --json`` of that one state
by each backend, read live one after another.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from slurm_defrag.slurm.pyslurm_adapter import objects

VOLATILE = ("source", "taken_at")


def recorded(recordings: SimpleNamespace, backend: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (recordings.dir("25.11") / f"snapshot-{backend}.json").read_text()
    )
    return {k: v for k, v in data.items() if k not in VOLATILE}


def mapped(recordings: SimpleNamespace) -> dict[str, Any]:
    snap = recordings.pyslurm("25.11").snapshot()
    assert snap.source == "pyslurm"
    return {k: v for k, v in snap.model_dump(mode="json").items() if k not in VOLATILE}


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


def test_loaded_collections_are_maps_of_objects() -> None:
    """pyslurm 25.11's ``Jobs.load()`` is a map: iterating it yields ids, not jobs."""
    job = SimpleNamespace(id=1)
    assert list(objects({1: job})) == [job]
    assert list(objects([job])) == [job]
