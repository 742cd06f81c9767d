"""What a snapshot must say of the shard scene (tests/e2e/test_shards_live.py): shared by
the live test and the offline replay of its recordings (tests/slurm)."""

from __future__ import annotations

from slurm_defrag.domain.cluster import ClusterSnapshot, JobState
from slurm_defrag.packing.fit_classes import TaskClass
from slurm_defrag.packing.workload_mix import job_class

NODE = "node04"
SHARDS = 32
"""node04's ``Gres=...,shard:32`` (docker/slurm): 4 per GPU, spread by Slurm."""


def check_shard_snapshot(snap: ClusterSnapshot, jobs: dict[str, str]) -> None:
    """A (3 shards), B (2 shards), C (2 whole GPUs) running on node04, P (2 shards) held."""
    node = next(n for n in snap.nodes if n.name == NODE)
    assert node.shards == SHARDS
    assert snap.shards_per_gpu == SHARDS // node.gpu_count == 4
    by_id = {j.id: j for j in snap.jobs}
    a, b, c, p = (by_id[jobs[role]] for role in "ABCP")
    assert (a.shards, b.shards, c.shards, p.shards) == (3, 2, 0, 2)
    ((node_a, gpu_a, n_a),) = a.shard_use
    ((node_b, gpu_b, n_b),) = b.shard_use
    assert (node_a, n_a, node_b, n_b) == (NODE, 3, NODE, 2)
    assert gpu_a != gpu_b  # 5 shards: more than one GPU's 4
    assert not a.gpus
    assert not b.gpus
    assert p.state == JobState.PENDING
    assert p.shard_use == ()
    assert p.request is None
    whole = c.gpus[NODE]
    assert len(whole) == 2
    assert not whole & {gpu_a, gpu_b}
    assert node.gpus_used == whole | {gpu_a, gpu_b}
    expected = tuple(
        1000 if g in whole else 750 if g == gpu_a else 500 if g == gpu_b else 0
        for g in range(node.gpu_count)
    )
    assert node.gpu_milli_used == expected
    per_gpu = snap.shards_per_gpu
    assert job_class(a, per_gpu) == TaskClass(1, 1, 750, 1.0)
    assert job_class(p, per_gpu) == TaskClass(1, 1, 500, 1.0)
    assert job_class(c, per_gpu) == TaskClass(1, 2, 1000, 1.0)


def check_unplaced_shard_snapshot(snap: ClusterSnapshot, jobs: dict[str, str]) -> None:
    """pyslurm (25.11): the shards each job holds, but not on which GPUs, so all of
    node04's GPUs count as busy and no job says where its shards are."""
    node = next(n for n in snap.nodes if n.name == NODE)
    assert node.shards == SHARDS
    assert node.gpus_used == frozenset(range(node.gpu_count))
    assert node.gpu_milli_used == (1000,) * node.gpu_count
    by_id = {j.id: j for j in snap.jobs}
    a, b, c, p = (by_id[jobs[role]] for role in "ABCP")
    assert (a.shards, b.shards, c.shards, p.shards) == (3, 2, 0, 2)
    assert a.shard_use == b.shard_use == ()
    assert len(c.gpus[NODE]) == 2
