"""Mutable cluster state: free CPU, memory and milli-GPUs per node, as numpy arrays.

One row per node, one column per GPU slot (nodes with fewer GPUs than the widest node have
trailing slots fixed at 0, which no request can use). Policies read the arrays and never
write them: :meth:`ClusterState.allocate` and :meth:`ClusterState.release` are the only
mutators of free resources, and each bumps the node's ``version`` so per-node caches know
what went stale.

Node ``Weight`` and features are mutable too (the levers slurm-defrag has on a real
cluster: ``scontrol update NodeName=.. Weight=.. AvailableFeatures=..``), changed only by
:meth:`ClusterState.set_weight` and :meth:`ClusterState.set_features`; each bumps
``config_version``, which keys the caches of Slurm's node order and of feature masks.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from slurm_defrag.domain.topology import BUILTIN_TOPOLOGIES, GpuTopology, pcie_only, popcount
from slurm_defrag.domain.units import MILLI
from slurm_defrag.sim.model import JobSpec, NodeSpec, Placement

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@lru_cache(maxsize=1 << 16)
def free_block_bits(topo: GpuTopology, free_mask: int) -> int:
    """Bit k set when the free GPUs in ``free_mask`` contain an NVLink block of k GPUs."""
    bits = 0
    for b in topo.blocks:
        if b & free_mask == b:
            bits |= 1 << popcount(b)
    return bits


def node_topology(spec: NodeSpec) -> GpuTopology:
    """The node's overlay topology; PCIe-only (no NVLink block beyond 1 GPU) when unset."""
    if spec.topology is not None:
        topo = BUILTIN_TOPOLOGIES.get(spec.topology)
        if topo is None:
            raise ValueError(f"node {spec.name}: unknown topology {spec.topology!r}")
        if topo.gpu_count != spec.gpus:
            raise ValueError(
                f"node {spec.name}: topology {topo.name} does not have {spec.gpus} GPUs"
            )
        return topo
    return _pcie(max(spec.gpus, 1))


@lru_cache(maxsize=32)
def _pcie(n: int) -> GpuTopology:
    return pcie_only(n, 1, name=f"pcie-1x{n}")


class ClusterState:
    """Free resources of every node; see the module docstring."""

    def __init__(self, nodes: Sequence[NodeSpec]) -> None:
        if not nodes:
            raise ValueError("a cluster needs at least one node")
        self.nodes: tuple[NodeSpec, ...] = tuple(nodes)
        n = len(self.nodes)
        width = max(1, max(s.gpus for s in self.nodes))
        self.cpu_cap: IntArray = np.array([s.cpu_milli for s in self.nodes], dtype=np.int64)
        self.mem_cap: IntArray = np.array([s.memory_mib for s in self.nodes], dtype=np.int64)
        self.gpu_count: IntArray = np.array([s.gpus for s in self.nodes], dtype=np.int64)
        self.weight: IntArray = np.array([s.weight for s in self.nodes], dtype=np.int64)
        self.models: tuple[str, ...] = tuple(sorted({s.model for s in self.nodes}))
        code = {m: i for i, m in enumerate(self.models)}
        self.model_idx: IntArray = np.array([code[s.model] for s in self.nodes], dtype=np.int64)
        self.topologies: tuple[GpuTopology, ...] = tuple(node_topology(s) for s in self.nodes)
        slots = np.arange(width)[None, :] < self.gpu_count[:, None]
        self.gpu_cap: IntArray = np.where(slots, MILLI, 0).astype(np.int64)
        self.cpu_left: IntArray = self.cpu_cap.copy()
        self.mem_left: IntArray = self.mem_cap.copy()
        self.gpu_left: IntArray = self.gpu_cap.copy()
        self.version: IntArray = np.zeros(n, dtype=np.int64)
        self.changes = 0
        """Bumped with every node's ``version``: keys caches of the whole free state."""
        self.block_bits: IntArray = np.array(
            [free_block_bits(t, t.all_mask) for t in self.topologies], dtype=np.int64
        )
        self._empty_block_bits = self.block_bits.copy()
        """NVLink block sizes each node has when empty (:meth:`could_hold`)."""
        self._holdable: dict[object, bool] = {}
        self.features: list[frozenset[str]] = [s.features for s in self.nodes]
        self.config_version = 0
        """Bumped by every weight or feature change."""
        self._order_version = -1
        self._slurm_order: IntArray = np.arange(n, dtype=np.int64)
        self._feature_masks: dict[str, BoolArray] = {}
        self._features_version = 0
        self.total_gpu_milli = int(self.gpu_cap.sum())
        self._model_masks: dict[frozenset[str] | None, BoolArray] = {}
        self._allowed: dict[frozenset[str], BoolArray] = {}

    @property
    def slurm_order(self) -> IntArray:
        """Node indices as cons_tres considers them: ascending Weight, then node order."""
        if self._order_version != self.config_version:
            n = self.size
            self._slurm_order = np.lexsort((np.arange(n), self.weight)).astype(np.int64)
            self._order_version = self.config_version
        return self._slurm_order

    def feature_mask(self, feature: str) -> BoolArray:
        """Nodes that have ``feature`` now."""
        if self._features_version != self.config_version:
            self._feature_masks.clear()
            self._features_version = self.config_version
        mask = self._feature_masks.get(feature)
        if mask is None:
            mask = np.array([feature in f for f in self.features], dtype=np.bool_)
            self._feature_masks[feature] = mask
        return mask

    def set_weight(self, node: int, weight: int) -> bool:
        """Change a node's Weight; True when it changed."""
        if int(self.weight[node]) == weight:
            return False
        self.weight[node] = weight
        self.config_version += 1
        return True

    def set_features(self, node: int, features: frozenset[str]) -> bool:
        """Replace a node's features; True when they changed."""
        if self.features[node] == features:
            return False
        self.features[node] = features
        self.config_version += 1
        return True

    @property
    def size(self) -> int:
        return len(self.nodes)

    @property
    def width(self) -> int:
        return int(self.gpu_left.shape[1])

    # -- questions --------------------------------------------------------------------

    def model_mask(self, models: frozenset[str] | None) -> BoolArray:
        """Nodes whose GPU model a job accepts (every node for None)."""
        mask = self._model_masks.get(models)
        if mask is None:
            if models is None:
                mask = np.ones(self.size, dtype=np.bool_)
            else:
                ok = np.array([m in models for m in self.models], dtype=np.bool_)
                mask = ok[self.model_idx]
            self._model_masks[models] = mask
        return mask

    def allowed(self, exclude: frozenset[str]) -> BoolArray:
        """Nodes not named in an ``--exclude`` list."""
        mask = self._allowed.get(exclude)
        if mask is None:
            mask = np.array([n.name not in exclude for n in self.nodes], dtype=np.bool_)
            self._allowed[exclude] = mask
        return mask

    def feasible(self, job: JobSpec) -> BoolArray:
        """Nodes that could start ``job`` now (CPU, memory, GPUs, model, NVLink block,
        ``--exclude``)."""
        ok = (self.cpu_left >= job.cpu_milli) & (self.mem_left >= job.memory_mib)
        if job.exclude:
            ok &= self.allowed(job.exclude)
        if job.num_gpu:
            ok &= self.model_mask(job.gpu_models)
            ok &= (self.gpu_left >= job.gpu_milli).sum(axis=1) >= job.num_gpu
            if job.nvlink and job.num_gpu > 1:
                ok &= (self.block_bits >> job.num_gpu) & 1 == 1
        return ok

    def could_hold(self, job: JobSpec) -> bool:
        """Could some node hold ``job`` if it were empty? (CPU, memory, GPUs, model,
        NVLink block, ``--exclude``: what slurmctld checks at submit against the
        partition's nodes; a job no node could ever hold is refused, not queued.)"""
        known = self._holdable.get(job.shape)
        if known is not None:
            return known
        ok = (self.cpu_cap >= job.cpu_milli) & (self.mem_cap >= job.memory_mib)
        if job.exclude:
            ok &= self.allowed(job.exclude)
        if job.num_gpu:
            ok &= self.model_mask(job.gpu_models)
            ok &= (self.gpu_cap >= job.gpu_milli).sum(axis=1) >= job.num_gpu
            if job.nvlink and job.num_gpu > 1:
                ok &= (self._empty_block_bits >> job.num_gpu) & 1 == 1
        self._holdable[job.shape] = answer = bool(ok.any())
        return answer

    def can_place(self, job: JobSpec, where: Placement) -> bool:
        """Would :meth:`allocate` accept this placement now?"""
        n = where.node
        if not 0 <= n < self.size or not self.feasible(job)[n]:
            return False
        gpus = where.gpus
        if len(gpus) != job.num_gpu or len(set(gpus)) != len(gpus):
            return False
        return all(
            0 <= g < self.gpu_count[n] and self.gpu_left[n, g] >= job.gpu_milli for g in gpus
        )

    def full_mask(self, node: int) -> int:
        """Bit mask of the node's completely free GPUs."""
        row = self.gpu_left[node]
        m = 0
        for g in range(int(self.gpu_count[node])):
            if row[g] == MILLI:
                m |= 1 << g
        return m

    def in_use(self) -> BoolArray:
        """Nodes running anything."""
        return (self.cpu_left < self.cpu_cap) | (self.gpu_left < self.gpu_cap).any(axis=1)

    def allocated_gpu_milli(self) -> int:
        return self.total_gpu_milli - int(self.gpu_left.sum())

    # -- mutations --------------------------------------------------------------------

    def allocate(self, job: JobSpec, where: Placement) -> None:
        """Take the job's resources; raises if they are not free (a policy bug)."""
        n = where.node
        if len(where.gpus) != job.num_gpu or len(set(where.gpus)) != job.num_gpu:
            raise ValueError(
                f"job {job.name}: placement has {where.gpus}, needs {job.num_gpu} GPUs"
            )
        if self.cpu_left[n] < job.cpu_milli or self.mem_left[n] < job.memory_mib:
            raise ValueError(f"job {job.name}: node {self.nodes[n].name} lacks CPU or memory")
        for g in where.gpus:
            if not 0 <= g < self.gpu_count[n] or self.gpu_left[n, g] < job.gpu_milli:
                raise ValueError(f"job {job.name}: GPU {g} of {self.nodes[n].name} is not free")
        self.cpu_left[n] -= job.cpu_milli
        self.mem_left[n] -= job.memory_mib
        for g in where.gpus:
            self.gpu_left[n, g] -= job.gpu_milli
        self._changed(n)

    def release(self, job: JobSpec, where: Placement) -> None:
        """Give back what :meth:`allocate` took."""
        n = where.node
        self.cpu_left[n] += job.cpu_milli
        self.mem_left[n] += job.memory_mib
        for g in where.gpus:
            self.gpu_left[n, g] += job.gpu_milli
        if self.cpu_left[n] > self.cpu_cap[n] or (self.gpu_left[n] > self.gpu_cap[n]).any():
            raise ValueError(f"job {job.name}: released more than node {n} holds")
        self._changed(n)

    def _changed(self, n: int) -> None:
        self.version[n] += 1
        self.changes += 1
        if self.gpu_count[n]:
            self.block_bits[n] = free_block_bits(self.topologies[n], self.full_mask(n))
