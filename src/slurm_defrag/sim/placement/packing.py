"""slurm-defrag's packing: low fragmentation rise, then busy nodes, then tight fit.

Order of preference for the node, each rule breaking the ties of the one before:

1. the smallest rise of FGD fragmentation, in steps of ``RISE_STEP`` milli-GPUs. Steps,
   not the exact rise: measured on openb, ranking by the exact rise spreads jobs over
   nodes whose rises differ by noise and leaves 5.7 % of GPUs unallocated at 130 %
   arrivals, against 4.5 % with 40-milli steps. Coarse equality lets rules 2-4 pack;
   FGD's own integer sigmoid score has the same effect by accident;
2. a node that already runs something, so empty nodes stay whole;
3. the least free GPU left after the job (best fit);
4. Slurm's order (``Weight``, then node order) — deterministic, no random draw.

GPUs: for a shared job the GPU with the smallest rise, partly used GPUs first; whole GPUs
are taken so that the largest NVLink block left free on the node is as large as possible
(:func:`slurm_defrag.sim.gpus.block_preserving`).
"""

from __future__ import annotations

import numpy as np

from slurm_defrag.domain.units import MILLI
from slurm_defrag.sim import gpus
from slurm_defrag.sim.cluster_state import BoolArray, ClusterState
from slurm_defrag.sim.frag import FragModel
from slurm_defrag.sim.model import JobSpec, Placement
from slurm_defrag.sim.placement.base import PolicyContext
from slurm_defrag.sim.placement.delta_cache import DeltaCache

_EPS = 1e-6
"""Rises closer than this (milli-GPUs) count as equal: float sums differ in the last bits."""
RISE_STEP = 40.0
"""Width (milli-GPUs) of the rise classes of rule 1 (about one FGD score level near 0)."""


class Packing:
    name = "packing"

    def __init__(self, ctx: PolicyContext) -> None:
        self.cache = DeltaCache(FragModel(ctx.state, ctx.task_types))
        rank = np.empty(ctx.state.size, dtype=np.int64)
        rank[ctx.state.slurm_order] = np.arange(ctx.state.size)
        self._rank = rank

    def choose(
        self, state: ClusterState, job: JobSpec, feasible: BoolArray, rng: np.random.Generator
    ) -> Placement | None:
        idx = np.flatnonzero(feasible)
        if idx.size == 0:
            return None
        delta = self.cache.delta(state, job)[idx]
        rise = np.floor(delta.min(axis=1) / RISE_STEP)
        idle = ~state.in_use()[idx]
        left_after = state.gpu_left[idx].sum(axis=1) - job.total_milli
        order = np.lexsort((self._rank[idx], left_after, idle, rise))
        node = int(idx[order[0]])
        if job.shared:
            row_delta = delta[order[0]]
            row = state.gpu_left[node]
            best = row_delta.min()
            cands = [g for g in range(state.width) if row_delta[g] <= best + _EPS]
            g = min(cands, key=lambda c: (row[c] == MILLI, row[c], c))
            return Placement(node, (int(g),))
        return Placement(node, gpus.block_preserving(state, node, job))
