"""Per job shape, the FGD rise on every node, recomputed only where nodes changed.

A placement changes one node, and a trace has few distinct job shapes (91 in openb), so
keeping the last answer per shape and refreshing the rows of changed nodes turns an
O(nodes x GPUs x task types) evaluation per job into one over a handful of rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slurm_defrag.sim.cluster_state import ClusterState, IntArray
from slurm_defrag.sim.frag import FloatArray, FragModel, stale
from slurm_defrag.sim.model import JobSpec

_Key = tuple[int, int, int, frozenset[str] | None]


@dataclass
class _Entry:
    seen: IntArray
    delta: FloatArray


class DeltaCache:
    def __init__(self, model: FragModel) -> None:
        self.model = model
        self._entries: dict[_Key, _Entry] = {}

    def delta(self, state: ClusterState, job: JobSpec) -> FloatArray:
        """:meth:`FragModel.placement_delta` for every node (rows in node order)."""
        key = (job.cpu_milli, job.num_gpu, job.gpu_milli, job.gpu_models)
        entry = self._entries.get(key)
        if entry is None:
            nodes = np.arange(state.size, dtype=np.int64)
            entry = _Entry(state.version.copy(), self.model.placement_delta(state, nodes, job))
            self._entries[key] = entry
            return entry.delta
        rows = stale(entry.seen, state)
        if rows.size:
            entry.delta[rows] = self.model.placement_delta(state, rows, job)
            entry.seen[rows] = state.version[rows]
        return entry.delta
