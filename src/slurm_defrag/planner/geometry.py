"""What one node's share of a target looks like, and how shares fit in a set of GPUs.

A share is ``k`` GPUs that are an NVLink block of the node's topology (``nvlink``), any
``k`` GPUs (``plain``), or every GPU of the node (``whole``, ``--exclusive``). The block
definition itself is :mod:`slurm_defrag.domain.topology`'s; nothing here re-defines it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from typing import Literal

from slurm_defrag.domain.cluster import GpuRequest
from slurm_defrag.domain.topology import GpuTopology, mask_of, popcount
from slurm_defrag.metrics.demand import DemandItem, item_for_request

Kind = Literal["nvlink", "plain", "whole"]


@dataclass(frozen=True, slots=True, order=True)
class Geometry:
    k: int
    kind: Kind
    cpus: int = 0
    """CPUs the share needs on its node besides the GPUs (0: untracked)."""
    memory_mb: int = 0
    """Memory the share needs on its node, MB (0: untracked)."""

    def __str__(self) -> str:
        return (
            "whole node"
            if self.kind == "whole"
            else f"{self.k}" + (" NVLink-connected" if self.kind == "nvlink" else "")
        )


def demand_item(req: GpuRequest, partition: str) -> DemandItem | None:
    """The per-node demand the metrics use, or None for a spreadable ``--gpus=N``."""
    if req.per_node_shape() is None:
        return None
    return item_for_request(req, partition)


def geometry_of(item: DemandItem) -> Geometry:
    if item.whole_node:
        return Geometry(item.gpus_per_node, "whole")
    return Geometry(item.gpus_per_node, "nvlink" if item.nvlink else "plain")


@lru_cache(maxsize=256)
def _combos(n: int, k: int) -> tuple[int, ...]:
    return tuple(mask_of(c) for c in combinations(range(n), k))


def share_size(topo: GpuTopology, g: Geometry) -> int:
    """GPUs one share of ``g`` takes on a node of ``topo`` (a whole-node share: all)."""
    return topo.gpu_count if g.kind == "whole" else g.k


def blocks_for(topo: GpuTopology, g: Geometry) -> tuple[int, ...]:
    """Every GPU set of ``topo`` that can be this share, as masks."""
    if g.k > topo.gpu_count:
        return ()
    if g.kind == "whole":
        return (topo.all_mask,)
    if g.kind == "nvlink":
        return topo.blocks_of_size(g.k)
    return _combos(topo.gpu_count, g.k)


Arrangement = tuple[int, tuple[int, ...]]
"""(busy GPUs used, one block per share in the order asked)."""


@lru_cache(maxsize=1 << 18)
def arrange(
    topo: GpuTopology, usable: int, free: int, shares: tuple[Geometry, ...]
) -> Arrangement | None:
    """Disjoint blocks for ``shares`` inside ``usable``, using as few busy GPUs (not in
    ``free``) as possible; None if they do not fit. Exact: tries every block combination
    of the structured shares; plain shares then take free GPUs first, which is optimal
    since any GPUs will do for them.
    """
    search = _Search(topo, free, shares)
    search.walk(usable, 0, 0, {})
    return search.best


class _Search:
    """One :func:`arrange` search. A class, not nested functions: a recursive closure
    refers to itself through its cell, a reference cycle per call left to the cyclic
    collector (104,000 objects, 7 MB at a time, per 1,000-node plan)."""

    __slots__ = ("best", "chosen", "free", "order", "shares", "topo")

    def __init__(self, topo: GpuTopology, free: int, shares: tuple[Geometry, ...]) -> None:
        self.topo, self.free, self.shares = topo, free, shares
        self.order = sorted(
            range(len(shares)), key=lambda i: (shares[i].kind == "plain", -shares[i].k)
        )
        self.best: Arrangement | None = None
        self.chosen = [0] * len(shares)

    def plain_fill(self, rem: int, pos: int, busy: int) -> None:
        shares, free, chosen = self.shares, self.free, self.chosen
        idx = self.order[pos:]
        need = sum(shares[i].k for i in idx)
        if popcount(rem) < need:
            return
        pool = [g for g in range(self.topo.gpu_count) if rem >> g & 1]
        pool.sort(key=lambda g: (not free >> g & 1, g))  # free GPUs first
        taken = 0
        for i in idx:
            m = mask_of(pool[taken : taken + shares[i].k])
            chosen[i] = m
            taken += shares[i].k
        extra = sum(1 for g in pool[:need] if not free >> g & 1)
        total = busy + extra
        if self.best is None or total < self.best[0]:
            self.best = (total, tuple(chosen))

    def walk(self, rem: int, pos: int, busy: int, prev: dict[Geometry, int]) -> None:
        best, order, shares = self.best, self.order, self.shares
        if best is not None and busy >= best[0] and best[0] == 0:
            return
        if pos == len(order) or shares[order[pos]].kind == "plain":
            self.plain_fill(rem, pos, busy)
            return
        i = order[pos]
        g = shares[i]
        floor = prev.get(g, -1)  # identical shares take blocks in increasing order
        for b in blocks_for(self.topo, g):
            if b & rem != b or b <= floor:
                continue
            self.chosen[i] = b
            self.walk(rem & ~b, pos + 1, busy + popcount(b & ~self.free), {**prev, g: b})
