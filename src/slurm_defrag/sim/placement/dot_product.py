"""Dot product, as in the FGD artifact (``dot_product_score.go``, ``merge`` + ``max`` norm).

Free and requested (CPU, total GPU) vectors are divided by the artifact's max spec; the
score is int(100 * (1 - <free, request> / 2)): the node whose free resources align least
with the request wins (the tightest packing), ties to the run's node ranking. Shared jobs
take the GPU with the least room that fits (the artifact's ``best`` GPU rule with ``merge``).
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


class DotProduct(ScoredFit):
    name = "dot-product"

    def score(self, cpu: FloatArray, gpu: FloatArray, job: JobSpec) -> FloatArray:
        dot = (cpu / MAX_SPEC_CPU) * (job.cpu_milli / MAX_SPEC_CPU) + (gpu / MAX_SPEC_GPU) * (
            job.total_milli / MAX_SPEC_GPU
        )
        return np.trunc(100.0 * (1.0 - dot / 2.0))
