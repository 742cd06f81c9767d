"""FGD: Fragmentation Gradient Descent (Weng et al., USENIX ATC '23), as in its artifact.

Each node scores int(100 * sigmoid(-dF / 1000)) where dF is the rise of the node's
fragmentation (:mod:`slurm_defrag.sim.frag`) if the job went there; the highest score wins
and ties go to the run's node ranking (see ``PolicyContext``). A shared job takes the GPU with the
best score on that node (lowest index on ties); whole GPUs are taken lowest-index first.

The integer score is kept on purpose: it is what the published figures were produced
with. slurm-defrag's own packing (:mod:`~slurm_defrag.sim.placement.packing`) uses the
exact rise instead.
"""

from __future__ import annotations

import numpy as np

from slurm_defrag.sim import gpus
from slurm_defrag.sim.cluster_state import BoolArray, ClusterState, IntArray
from slurm_defrag.sim.frag import FloatArray, FragModel
from slurm_defrag.sim.model import JobSpec, Placement
from slurm_defrag.sim.placement.base import PolicyContext, argmax_ranked
from slurm_defrag.sim.placement.delta_cache import DeltaCache


def fgd_score(delta: FloatArray) -> FloatArray:
    """The artifact's integer score; -1 where the choice is impossible (delta = inf)."""
    with np.errstate(over="ignore", invalid="ignore"):
        s = np.trunc(100.0 / (1.0 + np.exp(delta / 1000.0)))
    score: FloatArray = np.where(np.isfinite(delta), s, -1.0)
    return score


class Fgd:
    name = "fgd"

    def __init__(self, ctx: PolicyContext) -> None:
        self.cache = DeltaCache(FragModel(ctx.state, ctx.task_types))
        self._rank = ctx.tie_rank

    def node_scores(self, state: ClusterState, job: JobSpec) -> tuple[FloatArray, IntArray]:
        """Each node's score for the job and the GPU it is reached at (a shared job's GPU;
        for whole GPUs the column does not matter): here the best GPU."""
        score = fgd_score(self.cache.delta(state, job))
        best_col = np.argmax(score, axis=1)
        return score[np.arange(state.size), best_col], best_col

    def choose(
        self, state: ClusterState, job: JobSpec, feasible: BoolArray, rng: np.random.Generator
    ) -> Placement | None:
        if not feasible.any():
            return None
        node_score, col = self.node_scores(state, job)
        node = argmax_ranked(node_score, feasible, self._rank)
        if node is None:
            return None
        if job.shared:
            return Placement(node, (int(col[node]),))
        return Placement(node, gpus.lowest(state, node, job))
