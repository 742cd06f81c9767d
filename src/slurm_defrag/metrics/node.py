"""Per-node fragmentation figures."""

from __future__ import annotations

from collections.abc import Sequence

from slurm_defrag.domain.cluster import Node
from slurm_defrag.domain.topology import GpuTopology, popcount
from slurm_defrag.metrics.demand import DemandItem, WorkloadMix
from slurm_defrag.metrics.fit import Verdict, structural_verdict, usable_mask
from slurm_defrag.metrics.report import BLOCK_SIZES, FragCounts, NodeMetrics, Unusable


def structural_verdicts(
    node: Node, topo: GpuTopology, mix: WorkloadMix
) -> list[tuple[DemandItem, Verdict | None]]:
    """Per mix item, what keeps it off this node whatever runs there (None = nothing)."""
    return [(m, structural_verdict(node, topo, m)) for m in mix.items]


def node_metrics(
    node: Node,
    topo: GpuTopology,
    free_mask: int,
    mix: WorkloadMix,
    structural: list[tuple[DemandItem, Verdict | None]] | None = None,
) -> NodeMetrics:
    """Figures of one node; ``structural`` may be shared by nodes of one kind."""
    return node_figures(node, topo, free_mask, mix, structural)[0]


def fgd_of(weights: Sequence[float], lost: Sequence[int], total_weight: float) -> float:
    """FGD from each mix item's weight and the free GPUs that item cannot use on the node."""
    fgd = 0.0
    for w, n in zip(weights, lost, strict=True):
        fgd += w * n
    return fgd / total_weight


def node_figures(
    node: Node,
    topo: GpuTopology,
    free_mask: int,
    mix: WorkloadMix,
    structural: list[tuple[DemandItem, Verdict | None]] | None = None,
) -> tuple[NodeMetrics, tuple[int, ...]]:
    """:func:`node_metrics`, and per mix item the free GPUs it cannot use (FGD's terms).

    Everything but FGD depends on the mix's items, not their weights: with the terms, a
    new weighting of the same items (the pending queue grew by one job) needs only
    :func:`fgd_of`, not the whole computation.
    """
    if structural is None:
        structural = structural_verdicts(node, topo, mix)
    free = popcount(free_mask)
    available = node.available
    avail_mask = free_mask if available else 0
    n_avail = free if available else 0

    fits = {k: (n_avail // k if k <= node.gpu_count else 0) for k in BLOCK_SIZES}
    nvlink_fits = {k: topo.disjoint_blocks(avail_mask, k) for k in BLOCK_SIZES}

    # Which mix items could ever use this node, and which free GPUs each could use now.
    eligible = [m for m, v in structural if v is None]
    # Items kept out only by the node's NVLink topology still count for the topology view.
    relevant = [m for m, v in structural if v is None or v is Verdict.TOPOLOGY]
    usable = 0
    lost: list[int] = []
    for m, v in structural:
        u = usable_mask(topo, avail_mask, m) if v is None else 0
        usable |= u
        lost.append(n_avail - popcount(u))
    fgd = fgd_of([m.weight for m, _ in structural], lost, mix.total_weight)

    unusable_mask = avail_mask & ~usable
    n_unusable = popcount(unusable_mask)
    if not relevant:
        unusable = Unusable(configuration=n_unusable)
    elif not eligible:
        unusable = Unusable(topology=n_unusable)
    else:
        # GPUs on a node with enough free GPUs for some eligible job: what keeps that job out
        # is the NVLink topology. Otherwise there are simply too few free GPUs here.
        count_fits = any(
            n_avail >= m.gpus_per_node and not (m.whole_node and avail_mask != topo.all_mask)
            for m in eligible
        )
        unusable = Unusable(topology=n_unusable) if count_fits else Unusable(spatial=n_unusable)

    nvlink_sizes = frozenset(m.gpus_per_node for m in relevant if m.nvlink)
    outside = (
        n_avail - popcount(topo.gpus_in_free_blocks(avail_mask, nvlink_sizes))
        if nvlink_sizes
        else 0
    )
    counts = FragCounts(
        gpus=node.gpu_count,
        used=node.gpu_count - free,
        free=free,
        free_unavailable=free - n_avail,
        free_memory_gb=free * node.gpu_memory_gb,
        fits=fits,
        nvlink_fits=nvlink_fits,
        whole_nodes_free=int(available and free_mask == topo.all_mask),
        unusable=unusable,
        unusable_memory_gb=n_unusable * node.gpu_memory_gb,
        outside_nvlink_blocks=outside,
        fgd=fgd,
    )
    metrics = NodeMetrics(
        node=node.name,
        partitions=node.partitions,
        gpu_model=node.gpu_model,
        topology=topo.name,
        available=available,
        largest_free_block=topo.largest_free_block(avail_mask),
        counts=counts,
    )
    return metrics, tuple(lost)


def add_counts(parts: list[tuple[FragCounts, int]]) -> FragCounts:
    """Sum node figures into a partition or cluster figure: (figures, how many nodes)."""
    fits = dict.fromkeys(BLOCK_SIZES, 0)
    nvlink_fits = dict.fromkeys(BLOCK_SIZES, 0)
    totals = dict.fromkeys(
        ("gpus", "used", "free", "free_unavailable", "whole_nodes_free", "outside_nvlink_blocks"),
        0,
    )
    spatial = topology = configuration = 0
    free_mem = unusable_mem = fgd = 0.0
    for c, n in parts:
        for key in totals:
            totals[key] += n * getattr(c, key)
        for k in BLOCK_SIZES:
            fits[k] += n * c.fits.get(k, 0)
            nvlink_fits[k] += n * c.nvlink_fits.get(k, 0)
        spatial += n * c.unusable.spatial
        topology += n * c.unusable.topology
        configuration += n * c.unusable.configuration
        free_mem += n * c.free_memory_gb
        unusable_mem += n * c.unusable_memory_gb
        fgd += n * c.fgd
    return FragCounts(
        **totals,
        free_memory_gb=free_mem,
        fits=fits,
        nvlink_fits=nvlink_fits,
        unusable=Unusable(spatial=spatial, topology=topology, configuration=configuration),
        unusable_memory_gb=unusable_mem,
        fgd=fgd,
    )
