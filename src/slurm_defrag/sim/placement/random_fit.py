"""Random: a feasible node uniformly at random, a random GPU with room (the artifact's baseline)."""

from __future__ import annotations

import numpy as np

from slurm_defrag.sim import gpus
from slurm_defrag.sim.cluster_state import BoolArray, ClusterState
from slurm_defrag.sim.model import JobSpec, Placement
from slurm_defrag.sim.placement.base import PolicyContext


class RandomFit:
    name = "random"

    def __init__(self, ctx: PolicyContext) -> None:
        del ctx

    def choose(
        self, state: ClusterState, job: JobSpec, feasible: BoolArray, rng: np.random.Generator
    ) -> Placement | None:
        idx = np.flatnonzero(feasible)
        if idx.size == 0:
            return None
        node = int(idx[int(rng.integers(idx.size))])
        return Placement(node, gpus.random_fit(state, node, job, rng))
