"""Best fit, as in the FGD artifact (``best_fit_score.go``).

Score = int(100 * (1 - sum_i w_i (free_i - request_i) / maxspec_i)) over i = CPU, GPU with
w = 0.5 each; the node with the highest score wins, ties to the run's node ranking. (The artifact's
min-max normalisation of scores keeps the same winners, so it is left out.) A shared job
takes the GPU with the least room that fits.
"""

from __future__ import annotations

import numpy as np

from slurm_defrag.sim.frag import FloatArray
from slurm_defrag.sim.model import JobSpec
from slurm_defrag.sim.placement.base import (
    MAX_SPEC_CPU,
    MAX_SPEC_GPU,
    ScoredFit,
)


class BestFit(ScoredFit):
    name = "best-fit"

    def score(self, cpu: FloatArray, gpu: FloatArray, job: JobSpec) -> FloatArray:
        waste = (cpu - job.cpu_milli) / MAX_SPEC_CPU * 0.5 + (
            gpu - job.total_milli
        ) / MAX_SPEC_GPU * 0.5
        return np.trunc((1.0 - waste) * 100.0)
