"""Best fit, as in the FGD artifact (``best_fit_score.go``).

Score = int(100 * (1 - sum_i w_i (free_i - request_i) / maxspec_i)) over i = CPU, GPU with
w = 0.5 each; the node with the highest score wins, ties to the run's node ranking. (The artifact's
min-max normalisation of scores keeps the same winners, so it is left out.) A shared job
takes the GPU with the least room that fits.
"""

from __future__ import annotations

import numpy as np

from slurm_defrag.sim.cluster_state import BoolArray, ClusterState
from slurm_defrag.sim.model import JobSpec, Placement
from slurm_defrag.sim.placement.base import (
    MAX_SPEC_CPU,
    MAX_SPEC_GPU,
    PolicyContext,
    best_scored,
    free_vectors,
)


class BestFit:
    name = "best-fit"

    def __init__(self, ctx: PolicyContext) -> None:
        self._rank = ctx.tie_rank

    def choose(
        self, state: ClusterState, job: JobSpec, feasible: BoolArray, rng: np.random.Generator
    ) -> Placement | None:
        cpu, gpu = free_vectors(state)
        waste = (cpu - job.cpu_milli) / MAX_SPEC_CPU * 0.5 + (
            gpu - job.total_milli
        ) / MAX_SPEC_GPU * 0.5
        score = np.trunc((1.0 - waste) * 100.0)
        return best_scored(state, job, score, feasible, self._rank)
