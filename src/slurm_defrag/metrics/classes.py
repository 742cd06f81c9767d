"""Group nodes that are identical for every metric, so each shape is computed once.

Two nodes with the same topology, GPU model, memory, partitions and availability form a
*kind*; within a kind, nodes with the same free-GPU mask form a *class* and get the same
figures and the same verdict for every job. A 10,000-node cluster has a few dozen kinds and
a few thousand classes: structural questions are answered once per kind, free-mask
questions once per class, and each node costs only a copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slurm_defrag.domain.cluster import ClusterSnapshot, Node
from slurm_defrag.domain.topology import GpuTopology


@dataclass(eq=False, slots=True)
class NodeKind:
    rep: Node
    """A representative node (the first seen); only its non-name fields are meaningful."""
    topo: GpuTopology
    available: bool
    key: tuple[object, ...]
    """Everything about the node that the metrics read (its name excepted), topology included."""
    classes: list[NodeClass] = field(default_factory=list)


@dataclass(eq=False, slots=True)
class NodeClass:
    kind: NodeKind
    free_mask: int
    members: list[Node] = field(default_factory=list)

    @property
    def rep(self) -> Node:
        return self.kind.rep

    @property
    def topo(self) -> GpuTopology:
        return self.kind.topo

    @property
    def available(self) -> bool:
        return self.kind.available


def group_nodes(snapshot: ClusterSnapshot) -> list[NodeKind]:
    kinds: dict[tuple[object, ...], NodeKind] = {}
    classes: dict[tuple[int, int], NodeClass] = {}
    free_masks = snapshot.free_masks
    for node in snapshot.nodes:
        if node.gpu_count == 0:
            continue
        key = (
            node.topology,
            node.gpu_model,
            node.gpu_count,
            node.gpu_memory_gb,
            node.partitions,
            node.available,
        )
        kind = kinds.get(key)
        if kind is None:
            topo = snapshot.topology_of(node)
            # The topology object is part of the key: a custom topology may keep its name
            # and change its links from one snapshot to the next.
            kind = kinds[key] = NodeKind(node, topo, node.available, (*key, topo))
        mask = free_masks[node.name]
        cls = classes.get((id(kind), mask))
        if cls is None:
            cls = classes[(id(kind), mask)] = NodeClass(kind, mask)
            kind.classes.append(cls)
        cls.members.append(node)
    return list(kinds.values())
