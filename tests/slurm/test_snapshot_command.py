"""``slurm-defrag snapshot`` and live ``frag``, on recorded 24.11 output."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from slurm_defrag.cli import app
from slurm_defrag.slurm import backends
from slurm_defrag.snapshot_file import load_snapshot


@pytest.fixture
def recorded_cluster(monkeypatch: pytest.MonkeyPatch, recordings: SimpleNamespace) -> list[str]:
    chosen: list[str] = []

    def open_backend(settings):  # type: ignore[no-untyped-def]
        chosen.append(settings.backend)
        return recordings.cli("24.11") if settings.backend == "cli" else recordings.rest("24.11")

    monkeypatch.setattr(backends, "open_backend", open_backend)
    return chosen


def test_snapshot_json_and_out(recorded_cluster: list[str], tmp_path: Path) -> None:
    out = tmp_path / "snap.json"
    result = CliRunner().invoke(app, ["snapshot", "--backend", "rest", "--json", "--out", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["source"] == "rest"
    assert recorded_cluster == ["rest"]
    jobs = {j["id"]: j["gpus"] for j in data["jobs"]}
    assert jobs["8"] == {"node05": [0, 1], "node06": [0, 1]}
    assert load_snapshot(out).model_dump(mode="json") == data


def test_snapshot_table(recorded_cluster: list[str]) -> None:
    result = CliRunner().invoke(app, ["snapshot"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "fakegpu via cli" in result.stdout
    assert "GPUs 25/64 busy" in result.stdout
    assert "0-1,4-5" in result.stdout
    assert "defrag-demo" in result.stdout
    assert "demo: GPU maintenance" in result.stdout


def test_frag_reads_live_cluster_without_snapshot_option(recorded_cluster: list[str]) -> None:
    result = CliRunner().invoke(app, ["frag", "--json"])
    assert result.exit_code == 0, result.output
    assert recorded_cluster == ["cli"]
    assert json.loads(result.stdout)
