"""CPUs and memory in the snapshot model: optional, backward compatible, never negative."""

from __future__ import annotations

from slurm_defrag.domain.cluster import ClusterSnapshot, Job, JobState, Node
from slurm_defrag.synth import EPOCH


def test_old_snapshots_load_without_host_fields() -> None:
    raw = {
        "schema_version": 1,
        "taken_at": EPOCH.isoformat(),
        "nodes": [{"name": "g1", "gpu_model": "a100", "gpu_count": 8}],
        "jobs": [{"id": "1", "state": "RUNNING", "gpus": {"g1": [0]}}],
    }
    snap = ClusterSnapshot.model_validate(raw)
    node, job = snap.nodes[0], snap.jobs[0]
    assert (node.cpus, node.cpus_free, node.memory_free_mb) == (None, None, None)
    assert (job.cpus_per_node, job.memory_mb_per_node) == (0, 0)


def test_host_fields_round_trip() -> None:
    node = Node(
        name="g1",
        gpu_model="a100",
        gpu_count=8,
        cpus=64,
        cpus_alloc=48,
        memory_mb=512_000,
        memory_alloc_mb=128_000,
    )
    job = Job(
        id="1",
        state=JobState.RUNNING,
        gpus={"g1": frozenset({0})},
        cpus_per_node=8,
        memory_mb_per_node=64_000,
    )
    snap = ClusterSnapshot(taken_at=EPOCH, nodes=(node,), jobs=(job,))
    back = ClusterSnapshot.model_validate_json(snap.model_dump_json())
    assert back == snap
    assert back.nodes[0].cpus_free == 16
    assert back.nodes[0].memory_free_mb == 384_000


def test_oversubscribed_node_has_no_free_cpus() -> None:
    node = Node(name="g1", cpus=32, cpus_alloc=40, memory_mb=1000, memory_alloc_mb=1200)
    assert node.cpus_free == 0
    assert node.memory_free_mb == 0
