"""Live: GPUs shared through Slurm's ``shard`` GRES, read by every backend.

node04 of the compose cluster has ``Gres=gpu:h100:8,shard:32`` (4 shards per GPU, spread
by Slurm). Jobs on node04:

* A ``--gres=shard:3`` and B ``--gres=shard:2``: 5 shards, more than one GPU holds, so
  cons_tres puts them on two GPUs;
* C ``--gres=gpu:2``: two whole GPUs, neither of them one carrying shards;
* P ``--gres=shard:2 --hold``: pending.

Checked for the cli backend (JSON + text cross-check), the cli backend reading text only
and the rest backend: node04 counts 32 shards; the GPUs carrying shards are busy (no
whole-GPU job may get them: cons_tres keeps the two apart) at 750 and 500 milli-GPUs, C's
at 1000, the others free; A, B and P ask for 3, 2 and 2 shards, A and B hold them on the
GPUs the node reports; the workload mix counts them as shares of one GPU. 22.05 says how
many shards each GPU carries only per job (the node's ``GresUsed`` names the GPUs), 24.11
on the node as well; both must give the same numbers. pyslurm (s2511, where the service
image has it) says how many shards a job holds but not on which GPUs: there every GPU of
node04 counts as busy.

``SLURM_DEFRAG_RECORD=1`` writes what the cli backend read into
``tests/fixtures/shards-<release>/`` (replayed by ``tests/slurm/test_shards_recorded.py``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC

import pytest
from live_cluster import (
    PYSLURM_SUITES,
    ROOT,
    SUITE,
    ctld,
    exclusive_cluster,
    rest_backend,
    sbatch,
    version,
    wait_running,
)
from test_hostile_live import Recorder, cli, write_outputs
from test_pyslurm_live import read_all

from shard_checks import check_shard_snapshot, check_unplaced_shard_snapshot
from slurm_defrag.domain.cluster import ClusterSnapshot

# newsuite: every Slurm suite prints shard use its own way (22.05 and 24.11 differ), and
# node04 has shards on all of them
pytestmark = [pytest.mark.slurm, pytest.mark.newsuite]

RECORD = os.environ.get("SLURM_DEFRAG_RECORD") == "1"
NODE = "node04"


@dataclass
class Reads:
    jobs: dict[str, str]
    """role -> job id (A, B, C, P)."""
    snapshots: dict[str, ClusterSnapshot]
    """backend -> snapshot: json (cli default), text (cli, --json refused), rest."""


def _busy() -> str:
    return ctld("squeue", "-h", "-w", NODE, "-o", "%i").strip()


@pytest.fixture(scope="module")
def reads() -> Iterator[Reads]:
    with exclusive_cluster():
        if _busy():
            pytest.fail(f"{NODE} must be free of jobs for this test: {_busy()!r}")
        jobs: dict[str, str] = {}
        try:
            for role, gres in (("A", "shard:3"), ("B", "shard:2"), ("C", "gpu:2")):
                jobs[role] = sbatch("-A", "research", "-w", NODE, f"--gres={gres}", "-J", role)
            jobs["P"] = sbatch("-A", "research", "-w", NODE, "--gres=shard:2", "--hold")
            wait_running([jobs[r] for r in "ABC"])
            json_runner, text_runner = Recorder(), Recorder(refuse_json=True)
            snaps = {
                "json": cli(json_runner).snapshot(),
                "text": cli(text_runner).snapshot(),
                "rest": rest_backend().snapshot(),
            }
            if SUITE in PYSLURM_SUITES:  # in the service image, where pyslurm is
                _, _, py, _ = read_all()
                snaps["pyslurm"] = ClusterSnapshot.model_validate(
                    py | {"source": "pyslurm", "taken_at": snaps["json"].taken_at}
                )
            if RECORD:
                _record(jobs, {"json": json_runner, "text": text_runner}, snaps["json"])
            yield Reads(jobs, snaps)
        finally:
            if jobs:
                ctld("scancel", *jobs.values(), check=False)


def _record(jobs: dict[str, str], runners: dict[str, Recorder], snap: ClusterSnapshot) -> None:
    major, minor = version()
    base = ROOT / "tests" / "fixtures" / f"shards-{major}.{minor:02d}"
    write_outputs(base, runners)
    meta = {"taken_at": snap.taken_at.astimezone(UTC).isoformat(), "jobs": jobs}
    (base / "scene.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")


@pytest.mark.parametrize("backend", ["json", "text", "rest", "pyslurm"])
def test_every_backend_reads_shard_use(reads: Reads, backend: str) -> None:
    if backend not in reads.snapshots:
        pytest.skip(f"the service image of suite {SUITE} has no pyslurm")
    if backend == "pyslurm":  # it does not say which GPUs carry the shards
        check_unplaced_shard_snapshot(reads.snapshots[backend], reads.jobs)
    else:
        check_shard_snapshot(reads.snapshots[backend], reads.jobs)


def test_the_backends_agree(reads: Reads) -> None:
    def shard_view(snap: ClusterSnapshot) -> object:
        node = next(n for n in snap.nodes if n.name == NODE)
        jobs = {j.id: (j.shards, j.shard_use) for j in snap.jobs if j.id in reads.jobs.values()}
        return node.shards, node.gpus_used, node.gpu_milli_used, jobs

    views = {name: shard_view(s) for name, s in reads.snapshots.items() if name != "pyslurm"}
    assert all(v == views["json"] for v in views.values()), views
