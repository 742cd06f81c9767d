"""A metrics pass with a cache kept across snapshots equals a pass from scratch.

The cache (:class:`slurm_defrag.metrics.cache.MetricsCache`) reuses per-class figures,
per-node copies and group aggregates from earlier passes; whatever the sequence of
snapshots and mixes it sees, each report must be exactly the one computed without it.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.metrics.cache import MetricsCache
from slurm_defrag.metrics.compute import compute
from slurm_defrag.metrics.demand import DemandItem, WorkloadMix, default_mix
from slurm_defrag.synth import random_cluster
from strategies import snapshots

MIXES = (
    None,  # the pending queue (or the default mix when nothing waits)
    default_mix(),
    # The same items weighted differently: the cache keeps the figures, recomputes FGD.
    WorkloadMix(
        items=tuple(
            i.model_copy(update={"weight": w})
            for i, w in zip(default_mix().items, (5, 1, 3, 2), strict=True)
        )
    ),
    WorkloadMix(items=(DemandItem(gpus_per_node=4, nvlink=True, partition="batch"),)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(snapshots(), st.sampled_from(MIXES)), min_size=1, max_size=6),
    st.sampled_from((1, 3, 50_000)),
    st.booleans(),
)
def test_incremental_equals_from_scratch(
    sequence: list[tuple[ClusterSnapshot, WorkloadMix | None]], bound: int, repeat: bool
) -> None:
    # A tiny bound makes the cache start afresh in the middle of a pass.
    cache = MetricsCache(max_prototypes=bound)
    if repeat:  # an unchanged cluster read twice in a row: everything is a hit
        sequence = [item for item in sequence for _ in (0, 1)]
    for snap, mix in sequence:
        assert compute(snap, mix, cache=cache) == compute(snap, mix)


def _evolve(snap: ClusterSnapshot, rng: random.Random) -> ClusterSnapshot:
    """The next read: a few running jobs ended and their nodes show those GPUs free."""
    ending = [j for j in snap.running_gpu_jobs() if rng.random() < 0.05]
    freed: dict[str, set[int]] = {}
    for job in ending:
        for node, idx in job.gpus.items():
            freed.setdefault(node, set()).update(idx)
    nodes = tuple(
        n.model_copy(update={"gpus_used": n.gpus_used - freed[n.name]}) if n.name in freed else n
        for n in snap.nodes
    )
    ids = {j.id for j in ending}
    jobs = tuple(j for j in snap.jobs if j.id not in ids)
    return snap.model_copy(update={"nodes": nodes, "jobs": jobs})


def test_cache_reuses_classes_across_a_realistic_sequence() -> None:
    rng = random.Random(3)
    snap = random_cluster(200, seed=3)
    cache = MetricsCache()
    for _ in range(6):
        assert compute(snap, cache=cache) == compute(snap)
        snap = _evolve(snap, rng)
    # Jobs ending change a few classes per read: most were computed by an earlier pass.
    assert cache.hits > 2 * cache.misses
