"""Can one kind of job use a node, and which of its free GPUs?

The single place that answers "does demand item m fit node n": the node metrics, the FGD
measure and the false-starvation diagnosis all ask it, so they cannot disagree.
"""

from __future__ import annotations

from enum import StrEnum

from slurm_defrag.domain.cluster import Node, is_unknown
from slurm_defrag.domain.topology import GpuTopology, popcount
from slurm_defrag.metrics.demand import DemandItem


class Verdict(StrEnum):
    """Why a node can or cannot host one node's share of a job, in diagnosis order."""

    FITS = "fits"
    NOT_IN_PARTITION = "not-in-partition"
    JOB_LIMITS = "job-limits"  # the job's own -w / -x / --constraint rule the node out
    UNAVAILABLE = "unavailable"  # drained, down, reserved, ...
    CONFIGURATION = "configuration"  # wrong GPU model, or too few GPUs on the node at all
    TOPOLOGY = "topology"  # no NVLink block of that size now (or ever, on this topology)
    SPATIAL = "spatial"  # too few free GPUs on the node


def structural_verdict(node: Node, topo: GpuTopology, item: DemandItem) -> Verdict | None:
    """Reasons that hold whatever runs on the node (None = the node could host it when idle)."""
    if item.partition is not None and item.partition not in node.partitions:
        return Verdict.NOT_IN_PARTITION
    if not node.available:
        return Verdict.UNAVAILABLE
    return hardware_verdict(node, topo, item)


def hardware_verdict(node: Node, topo: GpuTopology, item: DemandItem) -> Verdict | None:
    """What the node's hardware alone rules out (model, GPU count, NVLink topology)."""
    if item.gpu_model is not None and item.gpu_model != node.gpu_model:
        return Verdict.CONFIGURATION
    if node.gpu_count < item.gpus_per_node:
        return Verdict.CONFIGURATION
    if item.nvlink and not topo.can_form_block(item.gpus_per_node):
        return Verdict.TOPOLOGY
    return None


def usable_mask(topo: GpuTopology, free: int, item: DemandItem) -> int:
    """Free GPUs that one node's share of ``item`` could be given now.

    The node must already be eligible (:func:`structural_verdict` is None).
    """
    k = item.gpus_per_node
    if item.whole_node:
        return free if free == topo.all_mask else 0
    if item.nvlink:
        return topo.gpus_in_free_blocks(free, frozenset({k}))
    return free if popcount(free) >= k else 0


def verdict(node: Node, topo: GpuTopology, free: int, item: DemandItem) -> Verdict:
    return structural_verdict(node, topo, item) or free_verdict(topo, free, item)


def free_verdict(topo: GpuTopology, free: int, item: DemandItem) -> Verdict:
    """The part of :func:`verdict` that depends on the free GPUs (node already eligible)."""
    k = item.gpus_per_node
    if item.whole_node and free != topo.all_mask:
        return Verdict.SPATIAL
    if popcount(free) < k:
        return Verdict.SPATIAL
    if item.nvlink and not topo.free_blocks(free, k):
        return Verdict.TOPOLOGY
    return Verdict.FITS


def explain(node: Node, topo: GpuTopology, free: int, item: DemandItem, v: Verdict) -> str:
    """A short sentence for a person reading the diagnosis."""
    k, n_free = item.gpus_per_node, popcount(free)
    match v:
        case Verdict.FITS:
            return f"{n_free} free GPUs, fits {k}"
        case Verdict.NOT_IN_PARTITION:
            return f"not in partition {item.partition}"
        case Verdict.JOB_LIMITS:
            return "ruled out by the job's own -w / -x / --constraint"
        case Verdict.UNAVAILABLE:
            return (
                "not available: "
                + ",".join(sorted(node.state))
                + (f" reservation={node.reservation}" if node.reservation else "")
            )
        case Verdict.CONFIGURATION:
            if item.gpu_model is not None and item.gpu_model != node.gpu_model:
                return f"{n_free} free {node.gpu_model} GPUs, job needs {item.gpu_model}"
            return f"node has {node.gpu_count} GPUs, job needs {k} per node"
        case Verdict.SPATIAL:
            if item.whole_node:
                return f"{n_free} of {node.gpu_count} GPUs free, job needs the whole node"
            return f"{n_free} free GPUs, job needs {k} on one node"
        case Verdict.TOPOLOGY if is_unknown(topo):
            return f"{n_free} free GPUs, NVLink topology unknown (no source gave it)"
        case Verdict.TOPOLOGY if topo.max_block < k:
            return (
                f"{n_free} free GPUs, but {topo.name} never forms an NVLink block of {k} "
                f"(largest possible is {topo.max_block})"
            )
        case Verdict.TOPOLOGY if not topo.can_form_block(k):
            sizes = ", ".join(map(str, sorted(topo.block_sizes)))
            return (
                f"{n_free} free GPUs, but {topo.name} never forms an NVLink block of {k} "
                f"(possible block sizes: {sizes})"
            )
        case Verdict.TOPOLOGY:
            return (
                f"{n_free} free GPUs, but the largest free NVLink block is "
                f"{topo.largest_free_block(free)} (job needs {k} connected)"
            )
