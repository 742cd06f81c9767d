"""Per-node fragmentation figures and their aggregation, each against a hand computation.

Definitions: docs/metrics.md and the docstrings of ``metrics/report.py``. Each case builds
one node, marks some GPUs busy, measures it against a stated workload mix and compares every
figure with numbers worked out by hand in the comments.
"""

from __future__ import annotations

import pytest

from builders import busy, item, mix, node, snapshot
from slurm_defrag.domain.cluster import Node
from slurm_defrag.metrics.compute import compute
from slurm_defrag.metrics.demand import WorkloadMix, default_mix
from slurm_defrag.metrics.report import FragCounts, NodeMetrics, Unusable


def measure(n: Node, busy_gpus: tuple[int, ...], the_mix: WorkloadMix) -> NodeMetrics:
    jobs = [busy(n.name, busy_gpus)] if busy_gpus else []
    return compute(snapshot([n], jobs), the_mix).nodes[0]


def test_nvswitch_node_with_default_mix() -> None:
    """NVSwitch-8, GPUs 0-2 busy: free {3..7} = 5, any subset of them is an NVLink block.

    Default mix: 1, 2nv, 4nv, 8nv, equal weights.
    fits: 5//1=5, 5//2=2, 5//4=1, 0.  nvlink_fits: the same (all-to-all).
    usable: the 1-GPU job can use all 5 -> nothing unusable.
    outside_nvlink_blocks: every free GPU is in a free 2-block -> 0.
    FGD: the 1-, 2nv- and 4nv-jobs can use all 5, the 8nv-job none: (0+0+0+5)/4 = 1.25.
    """
    m = measure(node("n1"), (0, 1, 2), default_mix())
    c = m.counts
    assert (c.gpus, c.used, c.free, c.free_unavailable) == (8, 3, 5, 0)
    assert c.free_memory_gb == 5 * 40
    assert c.fits == {1: 5, 2: 2, 4: 1, 8: 0}
    assert c.nvlink_fits == {1: 5, 2: 2, 4: 1, 8: 0}
    assert c.whole_nodes_free == 0
    assert m.largest_free_block == 5
    assert c.unusable == Unusable()
    assert c.unusable_memory_gb == 0
    assert c.outside_nvlink_blocks == 0
    assert c.fgd == pytest.approx(1.25)


def test_nvlink_pairs_node_with_default_mix() -> None:
    """NVLink pairs (0,1)(2,3)(4,5)(6,7), GPUs 0, 2, 4 busy: free {1,3,5,6,7} = 5.

    fits (count only): 5, 2, 1, 0.  nvlink_fits: only the card 6+7 is whole -> 2:1, 4:0.
    largest free block: 2 ({6,7}).
    The 4nv- and 8nv-jobs can never get a block here (largest possible is 2), but they are
    "relevant" for the topology view, so outside_nvlink_blocks looks at sizes {2, 4, 8}:
    only {6,7} lies in a free block -> 5 - 2 = 3 outside.
    unusable: the 1-GPU job can use all 5 -> 0.
    FGD: 1-job 0, 2nv-job 5-2 = 3, 4nv-job 5 (can never fit), 8nv-job 5: 13/4 = 3.25.
    """
    m = measure(node("n1", "nvlink-pairs-8"), (0, 2, 4), default_mix())
    c = m.counts
    assert (c.free, c.used) == (5, 3)
    assert c.fits == {1: 5, 2: 2, 4: 1, 8: 0}
    assert c.nvlink_fits == {1: 5, 2: 1, 4: 0, 8: 0}
    assert m.largest_free_block == 2
    assert c.outside_nvlink_blocks == 3
    assert c.unusable.total == 0
    assert c.fgd == pytest.approx(13 / 4)


def test_idle_node() -> None:
    """All 8 GPUs free: one whole node, one 8-block, nothing unusable for the default mix."""
    m = measure(node("n1", state="IDLE"), (), default_mix())
    c = m.counts
    assert c.whole_nodes_free == 1
    assert c.fits == {1: 8, 2: 4, 4: 2, 8: 1}
    assert c.nvlink_fits == {1: 8, 2: 4, 4: 2, 8: 1}
    assert m.largest_free_block == 8
    assert (c.unusable.total, c.outside_nvlink_blocks, c.fgd) == (0, 0, 0)


# Unusable GPUs by cause. (case, node, busy GPUs, mix, expected Unusable, largest free block)
UNUSABLE_CASES = [
    # course node01: NVSwitch, 2 free ({6,7}), a 3-GPU NVLink job: too few GPUs -> spatial 2
    (
        "spatial",
        node("n", "nvswitch-8"),
        (0, 1, 2, 3, 4, 5),
        mix(item(3, nvlink=True)),
        Unusable(spatial=2),
        2,
    ),
    # DGX-1, busy 2, 3, 5: 5 free >= 4, but no free quad -> the topology keeps it out
    (
        "topology, not connected",
        node("n", "dgx1-hybrid-cube-mesh", model="v100"),
        (2, 3, 5),
        mix(item(4, nvlink=True)),
        Unusable(topology=5),
        3,
    ),
    # course node04: pairs can never form a 3-block, 4 free -> topology 4
    (
        "topology, never",
        node("n", "nvlink-pairs-8"),
        (0, 3, 4, 5),
        mix(item(3, nvlink=True)),
        Unusable(topology=4),
        2,
    ),
    # wrong GPU model: the mix only wants H100
    (
        "configuration, model",
        node("n", "nvswitch-8"),
        (0, 1, 2),
        mix(item(2, gpu_model="h100")),
        Unusable(configuration=5),
        5,
    ),
    # a 4-GPU node can never host an 8-GPU job
    (
        "configuration, size",
        node("n", "nvswitch-4", state="IDLE"),
        (),
        mix(item(8)),
        Unusable(configuration=4),
        4,
    ),
    # the mix only has jobs of another partition
    (
        "configuration, partition",
        node("n", "nvswitch-8"),
        (0,),
        mix(item(1, partition="high")),
        Unusable(configuration=7),
        7,
    ),
    # exclusive jobs and one busy GPU: 7 free, none usable; too few "whole nodes" -> spatial
    (
        "spatial, whole node",
        node("n", "nvswitch-8"),
        (0,),
        mix(item(2, whole_node=True)),
        Unusable(spatial=7),
        7,
    ),
    # a 2nv-job can use every free GPU of the DGX-1 case above (each is in a free pair),
    # so adding it to the mix makes nothing unusable although the 4nv-job still cannot fit
    (
        "one usable item is enough",
        node("n", "dgx1-hybrid-cube-mesh", model="v100"),
        (2, 3, 5),
        mix(item(4, nvlink=True), item(2, nvlink=True)),
        Unusable(),
        3,
    ),
    # pairs node, free {1,3,5,6,7} and a 2nv-job: only 6+7 usable; 1, 3, 5 have enough free
    # GPUs on the node for 2 but no partner -> topology 3
    (
        "topology, partners busy",
        node("n", "nvlink-pairs-8"),
        (0, 2, 4),
        mix(item(2, nvlink=True)),
        Unusable(topology=3),
        2,
    ),
]


@pytest.mark.parametrize(
    ("n", "busy_gpus", "the_mix", "unusable", "largest"),
    [c[1:] for c in UNUSABLE_CASES],
    ids=[c[0] for c in UNUSABLE_CASES],
)
def test_unusable_by_cause(
    n: Node, busy_gpus: tuple[int, ...], the_mix: WorkloadMix, unusable: Unusable, largest: int
) -> None:
    m = measure(n, busy_gpus, the_mix)
    assert m.counts.unusable == unusable
    assert m.largest_free_block == largest
    # the memory view is the same GPUs times memory per GPU
    assert m.counts.unusable_memory_gb == unusable.total * n.gpu_memory_gb


def test_unusable_memory_uses_the_node_memory() -> None:
    """A100 80GB, 2 free GPUs unusable by a 3-GPU job: 2 x 80 = 160 GB (course node03)."""
    m = measure(node("n", model="a100-80g"), (1, 2, 3, 4, 5, 6), mix(item(3, nvlink=True)))
    assert m.counts.unusable_memory_gb == 160
    assert m.counts.free_memory_gb == 160


def test_fgd_is_weighted_by_the_mix() -> None:
    """NVSwitch, 3 free. Mix: 1-GPU jobs (weight 3), 4nv-jobs (weight 1).

    The 1-GPU job can use all 3 (fragment 0); the 4nv-job none (fragment 3).
    FGD = (3*0 + 1*3) / (3+1) = 0.75.
    """
    the_mix = mix(item(1, weight=3.0), item(4, nvlink=True, weight=1.0))
    m = measure(node("n"), (0, 1, 2, 3, 4), the_mix)
    assert m.counts.fgd == pytest.approx(0.75)


def test_fgd_counts_items_that_can_never_fit() -> None:
    """An item that can never use the node (other model) sees every free GPU as a fragment.

    NVSwitch A100, 6 free. Mix: 2-GPU A100 (usable: all 6), 2-GPU H100 (usable: none).
    FGD = (0 + 6) / 2 = 3.
    """
    the_mix = mix(item(2, gpu_model="a100"), item(2, gpu_model="h100"))
    assert measure(node("n"), (0, 1), the_mix).counts.fgd == pytest.approx(3.0)


def test_outside_nvlink_blocks_ignores_items_that_cannot_use_the_node() -> None:
    """Only NVLink sizes of items whose model/partition accept the node count.

    Pairs node, free {1,3,5,6,7}. Mix: a 2nv-job for H100 only: it can never use this A100
    node, so no NVLink size applies and no GPU is "outside" a block.
    """
    m = measure(node("n", "nvlink-pairs-8"), (0, 2, 4), mix(item(2, nvlink=True, gpu_model="h100")))
    assert m.counts.outside_nvlink_blocks == 0
    assert m.counts.unusable == Unusable(configuration=5)


@pytest.mark.parametrize(
    ("state", "reservation"),
    [
        ("IDLE+DRAIN", None),
        ("MIXED+DRAINING", None),
        ("DOWN", None),
        ("IDLE+NOT_RESPONDING", None),
        ("IDLE+POWERED_DOWN", None),
        ("IDLE+MAINTENANCE", None),
        ("IDLE+RESERVED", None),
        ("IDLE", "defrag-demo"),  # the reservation name alone marks the node reserved
    ],
)
def test_free_gpus_on_unavailable_nodes(state: str, reservation: str | None) -> None:
    """Free GPUs on a node that takes no new work are ``free_unavailable`` and nothing else.

    3 busy, 5 free: free = 5, free_unavailable = 5, and every figure about what could run
    (fits, NVLink fits, whole nodes, largest block, unusable, outside, FGD) is 0: the GPUs
    are unavailable, not fragmented.
    """
    m = measure(node("n", state=state, reservation=reservation), (0, 1, 2), default_mix())
    c = m.counts
    assert not m.available
    assert (c.free, c.used, c.free_unavailable) == (5, 3, 5)
    assert c.free_memory_gb == 5 * 40  # memory still describes the free GPUs
    assert c.fits == dict.fromkeys((1, 2, 4, 8), 0)
    assert c.nvlink_fits == dict.fromkeys((1, 2, 4, 8), 0)
    assert (c.whole_nodes_free, m.largest_free_block) == (0, 0)
    assert (c.unusable.total, c.unusable_memory_gb, c.outside_nvlink_blocks, c.fgd) == (0, 0, 0, 0)


def test_idle_drained_node_is_not_a_whole_free_node() -> None:
    m = measure(node("n", state="IDLE+DRAIN"), (), default_mix())
    assert m.counts.whole_nodes_free == 0
    assert m.counts.free_unavailable == 8


def test_gpus_busy_by_an_unknown_owner_are_used() -> None:
    """``gpus_used`` without a job (another user's job we cannot see) is used, not free."""
    snap = snapshot([node("n", gpus_used=(0, 1))], [busy("n", (2,))])
    c = compute(snap, default_mix()).nodes[0].counts
    assert (c.used, c.free) == (3, 5)


def test_partition_and_model_aggregation() -> None:
    """Three nodes, two partitions (node b is in both), two GPU models.

    a: A100 NVSwitch, batch,      busy 0-5  -> free 2, nvlink 2-fits 1, largest block 2
    b: A100 pairs,    batch+high, busy 0,2  -> free 6 (1,3,4,5,6,7), 2-fits 3, nv 2-fits 2
    c: H100 NVSwitch, high,       idle      -> free 8, whole node, largest block 8
    Partition figures are sums over member nodes, so b counts in both partitions; the
    cluster counts each node once. largest_free_block is a maximum.
    """
    nodes = [
        node("a", "nvswitch-8"),
        node("b", "nvlink-pairs-8", partitions=("batch", "high")),
        node("c", "nvswitch-8", model="h100", partitions=("high",), state="IDLE"),
    ]
    jobs = [busy("a", range(6)), busy("b", (0, 2))]
    report = compute(snapshot(nodes, jobs), mix(item(1)))
    parts = {g.name: g for g in report.partitions}
    models = {g.name: g for g in report.models}
    assert sorted(parts) == ["batch", "high"]
    assert sorted(models) == ["a100", "h100"]

    def summary(g: FragCounts) -> tuple[object, ...]:
        return (
            g.gpus,
            g.used,
            g.free,
            g.fits[2],
            g.nvlink_fits[2],
            g.whole_nodes_free,
            g.free_memory_gb,
        )

    # (gpus, used, free, fits[2], nvlink_fits[2], whole nodes, free GB)
    assert summary(parts["batch"].counts) == (16, 8, 8, 1 + 3, 1 + 2, 0, 8 * 40)
    assert summary(parts["high"].counts) == (16, 2, 14, 3 + 4, 2 + 4, 1, 6 * 40 + 8 * 80)
    assert summary(models["a100"].counts) == (16, 8, 8, 4, 3, 0, 320)
    assert summary(models["h100"].counts) == (8, 0, 8, 4, 4, 1, 640)
    assert summary(report.cluster_metrics.counts) == (24, 8, 16, 8, 7, 1, 960)
    assert (parts["batch"].nodes, parts["high"].nodes, report.cluster_metrics.nodes) == (2, 2, 3)
    assert (parts["batch"].largest_free_block, parts["high"].largest_free_block) == (2, 8)
    assert report.cluster_metrics.largest_free_block == 8
    # FGD ratio: with a 1-GPU mix nothing is a fragment
    assert report.cluster_metrics.fgd_ratio == 0.0


def test_identical_nodes_are_counted_once_each() -> None:
    """Nodes sharing kind and free mask are computed once; every one of them still counts."""
    nodes = [node(f"n{i}") for i in range(5)]
    jobs = [busy(f"n{i}", (0, 1, 2)) for i in range(5)]
    report = compute(snapshot(nodes, jobs), mix(item(4, nvlink=True)))
    c = report.cluster_metrics.counts
    assert report.cluster_metrics.nodes == 5
    assert (c.gpus, c.free, c.nvlink_fits[4], c.fgd) == (40, 25, 5, 0)
    assert [m.node for m in report.nodes] == [f"n{i}" for i in range(5)]


def test_nodes_without_gpus_are_left_out() -> None:
    nodes = [node("cpu", None, gpu_count=0, state="IDLE"), node("g")]
    report = compute(snapshot(nodes), mix(item(1)))
    assert [m.node for m in report.nodes] == ["g"]
    assert report.cluster_metrics.nodes == 1


def test_model_group_of_a_node_in_no_partition() -> None:
    """A node in no partition still counts for its model and the cluster."""
    report = compute(snapshot([node("x", partitions=())]), mix(item(1)))
    assert report.partitions == ()
    assert [g.name for g in report.models] == ["a100"]
    assert report.cluster_metrics.counts.free == 8
