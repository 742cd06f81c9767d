"""Live (Slurm 24.11): a ``topology/block`` cluster's blocks become NVLink domains.

``slurm-defrag snapshot`` (cli backend, ``--command-prefix 'docker exec CONTAINER'``)
against the throwaway block cluster of :mod:`block_cluster`, with a 2-node job running
in block b1. Runs in the trixie suite (22.05 has no topology/block); under CI=true a
missing Docker or image fails it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from block_cluster import CONFIG, block_cluster, docker, image_present
from live_cluster import DOCKER, SUITE, slurm_defrag

from infra import require

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    if SUITE != "trixie":
        pytest.skip(f"topology/block needs Slurm >= 23.11: runs in the trixie suite, not {SUITE}")
    require(Path(DOCKER).exists(), "docker")
    require(image_present(), "the slurm-defrag/slurm:trixie image (scripts/cluster.sh up)")
    with block_cluster() as name:
        yield name


def test_snapshot_reads_blocks_as_nvlink_domains(cluster: str, tmp_path: Path) -> None:
    job = docker(
        "exec",
        "-w",
        "/jobs",
        cluster,
        "sbatch",
        "--parsable",
        "-J",
        "e2e-block",
        "-N2",
        "-w",
        "node[01-02]",
        "--gres=gpu:4",
        "--wrap",
        "sleep 600",
    ).stdout.strip()
    for _ in range(60):
        state = docker("exec", cluster, "squeue", "-h", "-j", job, "-o", "%T").stdout.strip()
        if state == "RUNNING":
            break
        docker("exec", cluster, "sleep", "1")
    assert state == "RUNNING"
    out = tmp_path / "snap.json"
    proc = slurm_defrag(
        "snapshot",
        "--backend",
        "cli",
        "--command-prefix",
        f"{DOCKER} exec {cluster}",
        "--gres-conf",
        str(CONFIG / "gres.conf"),
        "--json",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    snap = json.loads(out.read_text(encoding="utf-8"))
    assert snap["nvlink_domains"] == [
        {"name": "b1", "nodes": ["node01", "node02"]},
        {"name": "b2", "nodes": ["node03", "node04"]},
    ]
    assert {n["name"]: n["nvlink_domain"] for n in snap["nodes"]} == {
        "node01": "b1",
        "node02": "b1",
        "node03": "b2",
        "node04": "b2",
    }
    held = next(j for j in snap["jobs"] if j["id"] == job)["gpus"]
    assert held == {"node01": [0, 1, 2, 3], "node02": [0, 1, 2, 3]}
    assert all(n["topology"] for n in snap["nodes"])  # gres.conf Links= still applies


def test_scontrol_still_prints_what_was_recorded(cluster: str) -> None:
    """The parser's recording is what this Slurm prints (catches an image upgrade)."""
    live = docker("exec", cluster, "scontrol", "show", "topology").stdout
    recorded = (CONFIG.parent / "scontrol_show_topology.txt").read_text(encoding="utf-8")
    assert live == recorded
