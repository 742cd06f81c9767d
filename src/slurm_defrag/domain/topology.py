"""GPU interconnect topology of one node, and what a free "NVLink block" is.

Definition used everywhere in slurm-defrag (metrics, planner, simulator):

    A *free NVLink block of k GPUs* on a node is a set of k free GPUs that are pairwise
    NVLink-connected (a k-clique of the node's NVLink graph), or all GPUs of one NVLink
    domain (a connected component of the NVLink graph) when k equals the domain's size.

k = 1 is always a block. The second clause admits hybrid meshes (DGX-1) where the whole
8-GPU island is connected but not all-to-all: an 8-GPU job asking for NVLink may take the
whole island, a 3-GPU job must find 3 GPUs that are directly linked. Multi-node NVLink
domains (NVL72 racks, Slurm's topology/block) are modelled at cluster level, see
:class:`slurm_defrag.domain.cluster.NvlinkDomain`.

GPU sets are handled as bit masks (bit i = GPU index i). Nodes have a handful of GPUs, so
every clique is enumerated once per topology and answers are memoised per free mask: the
10,000-node metrics pass costs a dictionary lookup per node.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property, lru_cache
from itertools import combinations
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_GPUS_PER_NODE = 16  # clique enumeration is 2**n; no real node has more than 16 GPUs


def mask_of(indices: Iterable[int]) -> int:
    m = 0
    for i in indices:
        m |= 1 << i
    return m


def indices_of(mask: int) -> tuple[int, ...]:
    return tuple(i for i in range(mask.bit_length()) if mask >> i & 1)


def popcount(mask: int) -> int:
    return mask.bit_count()


Link = Annotated[tuple[int, int], Field(description="an NVLink-connected GPU pair (i, j), i < j")]


class GpuTopology(BaseModel):
    """A node's GPUs and the NVLink (or NVSwitch) links between them.

    PCIe/host paths are not links here: every GPU pair can talk over PCIe, only NVLink
    makes a block. ``pcie_switches`` optionally groups GPUs behind one PCIe switch; it is
    informative (shown in maps) and does not create blocks.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    gpu_count: Annotated[int, Field(ge=1, le=MAX_GPUS_PER_NODE)]
    nvlinks: tuple[Link, ...] = ()
    pcie_switches: tuple[tuple[int, ...], ...] = ()
    description: str = ""

    @model_validator(mode="after")
    def _check_links(self) -> GpuTopology:
        seen: set[tuple[int, int]] = set()
        for n, (i, j) in enumerate(self.nvlinks):
            if not (0 <= i < self.gpu_count and 0 <= j < self.gpu_count):
                raise ValueError(f"nvlinks[{n}]: GPU index out of range 0..{self.gpu_count - 1}")
            if i == j:
                raise ValueError(f"nvlinks[{n}]: a GPU cannot link to itself")
            key = (min(i, j), max(i, j))
            if key in seen:
                raise ValueError(f"nvlinks[{n}]: duplicate link {key}")
            seen.add(key)
        return self

    # -- derived structure (computed once per topology object) -------------------------

    @cached_property
    def _adjacency(self) -> tuple[int, ...]:
        adj = [0] * self.gpu_count
        for i, j in self.nvlinks:
            adj[i] |= 1 << j
            adj[j] |= 1 << i
        return tuple(adj)

    @cached_property
    def all_mask(self) -> int:
        return (1 << self.gpu_count) - 1

    @cached_property
    def domains(self) -> tuple[int, ...]:
        """Connected components of the NVLink graph, as masks (singletons included)."""
        seen = 0
        comps: list[int] = []
        for g in range(self.gpu_count):
            if seen >> g & 1:
                continue
            comp, frontier = 1 << g, 1 << g
            while frontier:
                nxt = 0
                for i in indices_of(frontier):
                    nxt |= self._adjacency[i]
                frontier = nxt & ~comp
                comp |= nxt
            seen |= comp
            comps.append(comp)
        return tuple(comps)

    @cached_property
    def blocks(self) -> tuple[int, ...]:
        """Every NVLink block (cliques and whole domains) as masks, largest first."""
        adj = self._adjacency
        cliques = {1 << g for g in range(self.gpu_count)}
        frontier = set(cliques)
        while frontier:  # grow cliques one GPU at a time, in increasing index order
            grown = set()
            for c in frontier:
                top = c.bit_length() - 1
                common = self.all_mask
                for i in indices_of(c):
                    common &= adj[i]
                common &= ~((1 << (top + 1)) - 1)
                for g in indices_of(common):
                    grown.add(c | 1 << g)
            cliques |= grown
            frontier = grown
        cliques |= set(self.domains)
        return tuple(sorted(cliques, key=lambda m: (-popcount(m), m)))

    @cached_property
    def max_block(self) -> int:
        """Size of the largest NVLink block this node can ever offer."""
        return popcount(self.blocks[0])

    @cached_property
    def block_sizes(self) -> frozenset[int]:
        """Every k for which this node can ever offer a k-GPU NVLink block.

        Not always ``1..max_block``: a DGX-1 hybrid cube-mesh has blocks of 1-4 GPUs (cliques)
        and 8 (the whole island), but none of 5, 6 or 7.
        """
        return frozenset(popcount(b) for b in self.blocks)

    def can_form_block(self, k: int) -> bool:
        """True if some set of k GPUs of this node is an NVLink block (all GPUs free)."""
        return k in self.block_sizes

    def blocks_of_size(self, k: int) -> tuple[int, ...]:
        return _blocks_of_size(self, k)

    def is_block(self, gpus: Iterable[int]) -> bool:
        """True if these GPUs form an NVLink block (pairwise linked or a whole domain)."""
        return mask_of(gpus) in _block_set(self)

    def largest_free_block(self, free_mask: int) -> int:
        return _largest_free_block(self, free_mask)

    def free_blocks(self, free_mask: int, k: int) -> tuple[int, ...]:
        """All size-k blocks made only of free GPUs."""
        return tuple(b for b in self.blocks_of_size(k) if b & free_mask == b)

    def disjoint_blocks(self, free_mask: int, k: int) -> int:
        """How many k-GPU NVLink jobs could start at once on these free GPUs."""
        return _disjoint_blocks(self, free_mask, k)

    def gpus_in_free_blocks(self, free_mask: int, sizes: frozenset[int]) -> int:
        """Mask of free GPUs that belong to at least one free block of a size in ``sizes``."""
        return _covered(self, free_mask, sizes)

    @cached_property
    def _hash(self) -> int:
        return hash((self.name, self.gpu_count, self.nvlinks))

    def __hash__(self) -> int:  # used as a memo key on hot paths: hash the fields once
        return self._hash


@lru_cache(maxsize=4096)
def _block_set(topo: GpuTopology) -> frozenset[int]:
    return frozenset(topo.blocks)


@lru_cache(maxsize=4096)
def _blocks_of_size(topo: GpuTopology, k: int) -> tuple[int, ...]:
    return tuple(b for b in topo.blocks if popcount(b) == k)


@lru_cache(maxsize=1 << 16)
def _largest_free_block(topo: GpuTopology, free_mask: int) -> int:
    for b in topo.blocks:  # sorted largest first
        if b & free_mask == b:
            return popcount(b)
    return 0


@lru_cache(maxsize=1 << 18)
def _disjoint_blocks(topo: GpuTopology, free_mask: int, k: int) -> int:
    if k <= 0 or popcount(free_mask) < k:
        return 0
    candidates = [b for b in topo.blocks_of_size(k) if b & free_mask == b]
    if not candidates:
        return 0
    # Branch on the lowest free GPU that lies in some candidate: either it is in a chosen
    # block, or it stays unused. Exact, and tiny for <= 16 GPUs thanks to memoisation.
    covered = 0
    for b in candidates:
        covered |= b
    low = covered & -covered
    best = _disjoint_blocks(topo, free_mask & ~low, k)
    for b in candidates:
        if b & low:
            best = max(best, 1 + _disjoint_blocks(topo, free_mask & ~b, k))
    return best


@lru_cache(maxsize=1 << 16)
def _covered(topo: GpuTopology, free_mask: int, sizes: frozenset[int]) -> int:
    out = 0
    for k in sizes:
        for b in topo.blocks_of_size(k):
            if b & free_mask == b:
                out |= b
    return out & free_mask


# -- built-in templates ----------------------------------------------------------------


def _all_to_all(n: int) -> tuple[tuple[int, int], ...]:
    return tuple(combinations(range(n), 2))


def nvswitch(n: int = 8, name: str | None = None) -> GpuTopology:
    return GpuTopology(
        name=name or f"nvswitch-{n}",
        gpu_count=n,
        nvlinks=_all_to_all(n),
        description=f"NVSwitch all-to-all, {n} GPUs (HGX/DGX A100, H100)",
    )


def nvlink_pairs(n: int = 8, name: str | None = None) -> GpuTopology:
    return GpuTopology(
        name=name or f"nvlink-pairs-{n}",
        gpu_count=n,
        nvlinks=tuple((i, i + 1) for i in range(0, n - 1, 2)),
        pcie_switches=(tuple(range(n // 2)), tuple(range(n // 2, n))),
        description=f"PCIe cards bridged in NVLink pairs, {n} GPUs (A100/H100 NVL)",
    )


def dgx1_hybrid_cube_mesh() -> GpuTopology:
    quad_a = tuple(combinations(range(4), 2))
    quad_b = tuple(combinations(range(4, 8), 2))
    cross = tuple((i, i + 4) for i in range(4))
    return GpuTopology(
        name="dgx1-hybrid-cube-mesh",
        gpu_count=8,
        nvlinks=tuple(sorted(quad_a + quad_b + cross)),
        pcie_switches=((0, 1), (2, 3), (4, 5), (6, 7)),
        description="DGX-1 V100 hybrid cube-mesh: two all-to-all quads, GPU i linked to i+4",
    )


def pcie_only(n: int = 8, switches: int = 2, name: str | None = None) -> GpuTopology:
    per = n // switches
    return GpuTopology(
        name=name or f"pcie-{switches}x{per}",
        gpu_count=n,
        pcie_switches=tuple(tuple(range(s * per, (s + 1) * per)) for s in range(switches)),
        description=f"PCIe only, {switches} switches of {per} GPUs, no NVLink",
    )


def builtin_topologies() -> dict[str, GpuTopology]:
    """Templates every snapshot may name without defining them."""
    items = [
        nvswitch(8),
        nvswitch(4),
        nvlink_pairs(8),
        nvlink_pairs(4),
        nvlink_pairs(2),
        dgx1_hybrid_cube_mesh(),
        pcie_only(8, 2),
        pcie_only(4, 1),
        pcie_only(2, 1),
        pcie_only(1, 1),
    ]
    return {t.name: t for t in items}


BUILTIN_TOPOLOGIES = builtin_topologies()
