"""Metric figures kept from one snapshot to the next, so a pass costs only what changed.

Between two reads a minute apart, a 1,000-node cluster changes a handful of nodes: almost
every (node kind, free-GPU mask) class already had its figures computed last time, every
unchanged node keeps its per-node copy, and a partition whose classes and counts did not
move keeps its aggregate. Figures depend on the workload mix too: a new weighting of the
same demand items (one more job of a kind already pending) only recomputes FGD from the
per-item terms kept with each class, and new items start afresh. Entries are plain results
of deterministic functions of their key, which is why a cached pass equals a pass from
scratch.
"""

from __future__ import annotations

from collections.abc import Callable

from slurm_defrag.metrics.demand import DemandItem, WorkloadMix
from slurm_defrag.metrics.node import fgd_of
from slurm_defrag.metrics.report import GroupMetrics, NodeMetrics
from slurm_defrag.metrics.starvation import DiagnosisMemo

Members = list[tuple[NodeMetrics, int]]
ClassKey = tuple[tuple[object, ...], int]  # (node kind, free-GPU mask)


class MetricsCache:
    """Per-class, per-node and per-group figures of the last pass(es) under one mix.

    ``max_prototypes`` bounds memory on a cluster whose free masks never repeat: past it
    the cache starts afresh (a few thousand classes is typical for 10,000 nodes).
    """

    def __init__(self, max_prototypes: int = 50_000) -> None:
        self.max_prototypes = max_prototypes
        self._items: tuple[DemandItem, ...] | None = None  # the mix, weights left out
        self._weights: tuple[float, ...] = ()
        self._total_weight = 1.0
        # class -> (its figures, the weights they were computed with, FGD's per-item terms)
        self._protos: dict[ClassKey, tuple[NodeMetrics, tuple[float, ...], tuple[int, ...]]]
        self._protos = {}
        self._nodes: dict[str, tuple[NodeMetrics, NodeMetrics]] = {}
        self._groups: dict[
            tuple[str, str], tuple[tuple[tuple[NodeMetrics, int], ...], GroupMetrics]
        ]
        self._groups = {}
        self.diagnoses: DiagnosisMemo = {}
        """Pending jobs' node-by-node explanations (see :func:`~.starvation.diagnose_job`)."""
        self.hits = self.misses = 0

    def clear(self) -> None:
        self.diagnoses.clear()
        self._protos.clear()
        self._nodes.clear()
        self._groups.clear()

    def use_mix(self, mix: WorkloadMix) -> None:
        items = tuple(i.model_copy(update={"weight": 1.0}) for i in mix.items)
        if items != self._items:
            self.clear()
            self._items = items
        if len(self.diagnoses) >= self.max_prototypes:
            self.diagnoses.clear()
        self._weights = tuple(i.weight for i in mix.items)
        self._total_weight = mix.total_weight

    def prototype(self, kind_key: tuple[object, ...], free_mask: int) -> NodeMetrics | None:
        """The figures of a class under the current mix, None if it must be computed."""
        entry = self._protos.get((kind_key, free_mask))
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        proto, weights, lost = entry
        if weights != self._weights:  # same items, new weights: only FGD changes
            counts = proto.counts.model_copy(
                update={"fgd": fgd_of(self._weights, lost, self._total_weight)}
            )
            proto = proto.model_copy(update={"counts": counts})
            self._protos[(kind_key, free_mask)] = (proto, self._weights, lost)
        return proto

    def keep_prototype(
        self,
        kind_key: tuple[object, ...],
        free_mask: int,
        proto: NodeMetrics,
        lost: tuple[int, ...],
    ) -> None:
        """Remember a class's figures and FGD terms (from :func:`~.node.node_figures`)."""
        if len(self._protos) >= self.max_prototypes:
            self.clear()
        self._protos[(kind_key, free_mask)] = (proto, self._weights, lost)

    def node_copy(self, name: str, proto: NodeMetrics) -> NodeMetrics:
        """The prototype's figures under ``name``; the same object as last time if unchanged."""
        last = self._nodes.get(name)
        if last is not None and last[0] is proto:
            return last[1]
        # No re-validation: the prototype was validated. model_copy, not model_construct:
        # half the cost (10,000 copies a pass on a 10,000-node cluster).
        copy = proto.model_copy(update={"node": name})
        self._nodes[name] = (proto, copy)
        return copy

    def group(
        self,
        scope: str,
        name: str,
        members: Members,
        aggregate: Callable[[str, Members], GroupMetrics],
    ) -> GroupMetrics:
        """``aggregate(name, members)``, reused while the group has the same classes and sizes.

        "Same" is identity of the prototypes (kept alive by the entry, so an id cannot be
        reused): cheap, and a prototype equal in value but rebuilt only costs a recount.
        """
        last = self._groups.get((scope, name))
        if last is not None and _same_members(last[0], members):
            return last[1]
        result = aggregate(name, members)
        self._groups[(scope, name)] = (tuple(members), result)
        return result


def _same_members(kept: tuple[tuple[NodeMetrics, int], ...], members: Members) -> bool:
    return len(kept) == len(members) and all(
        p is q and n == k for (p, n), (q, k) in zip(kept, members, strict=True)
    )
