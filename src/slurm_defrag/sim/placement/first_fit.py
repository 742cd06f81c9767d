"""First fit in Slurm order: what ``select/cons_tres`` does for a one-node job.

cons_tres takes nodes by ascending ``Weight`` and then in node order, and GPUs by lowest
index. Deterministic, so a trace replayed here and on a real Slurm cluster should land on
the same nodes (the planned cross-check against the compose cluster relies on this).
"""

from __future__ import annotations

import numpy as np

from slurm_defrag.sim import gpus
from slurm_defrag.sim.cluster_state import BoolArray, ClusterState
from slurm_defrag.sim.model import JobSpec, Placement
from slurm_defrag.sim.placement.base import PolicyContext


class FirstFit:
    name = "first-fit"

    def __init__(self, ctx: PolicyContext) -> None:
        del ctx

    def choose(
        self, state: ClusterState, job: JobSpec, feasible: BoolArray, rng: np.random.Generator
    ) -> Placement | None:
        ordered = feasible[state.slurm_order]
        if not ordered.any():
            return None
        node = int(state.slurm_order[int(np.argmax(ordered))])
        return Placement(node, gpus.lowest(state, node, job))
