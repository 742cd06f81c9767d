"""The policy interface and helpers shared by several policies."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from slurm_defrag.sim import gpus
from slurm_defrag.sim.cluster_state import BoolArray, ClusterState, IntArray
from slurm_defrag.sim.frag import FloatArray, TaskType
from slurm_defrag.sim.model import JobSpec, Placement


class PlacementPolicy(Protocol):
    """Chooses where a job starts among the nodes where it fits now."""

    name: str

    def choose(
        self, state: ClusterState, job: JobSpec, feasible: BoolArray, rng: np.random.Generator
    ) -> Placement | None:
        """A placement on a node with ``feasible`` True, or None when there is none."""
        ...


@dataclass(frozen=True)
class PolicyContext:
    """What a policy may learn before the run.

    ``tie_rank`` orders nodes for breaking score ties (lower wins). The FGD artifact runs a
    kube-scheduler fork whose ``selectHost`` keeps the lexicographically smallest node name
    among equal scores, and names nodes ``<random permutation index>-<name>`` per seed: a
    random but fixed node ranking for the whole run. Policies that imitate the artifact use
    it; a fresh random draw per job instead spreads work and changes results a lot (FGD
    strands ~9 % of the GPUs because CPU-only jobs land everywhere).
    """

    state: ClusterState
    task_types: Sequence[TaskType]
    tie_rank: IntArray


def argmax_ranked(scores: IntArray | FloatArray, feasible: BoolArray, rank: IntArray) -> int | None:
    """Index of the highest score among feasible nodes; ties go to the lowest ``rank``."""
    idx = np.flatnonzero(feasible)
    if idx.size == 0:
        return None
    s = scores[idx]
    top = idx[s == s.max()]
    return int(top[int(np.argmin(rank[top]))]) if top.size > 1 else int(top[0])


MAX_SPEC_CPU = 128_000
"""The artifact's normaliser for CPU (milli-cores of its largest node)."""
MAX_SPEC_GPU = 8_000
"""The artifact's normaliser for GPU (milli-GPUs of an 8-GPU node)."""


def free_vectors(state: ClusterState) -> tuple[FloatArray, FloatArray]:
    """Free CPU and total free milli-GPU per node, as floats."""
    return state.cpu_left.astype(np.float64), state.gpu_left.sum(axis=1).astype(np.float64)


def best_scored(
    state: ClusterState, job: JobSpec, score: FloatArray, feasible: BoolArray, rank: IntArray
) -> Placement | None:
    """The feasible node with the highest score (ties to the run's node ranking), on the
    GPUs with the least room that fits: the shape every scoring policy of the artifact
    shares (best fit, dot product); only the score differs."""
    node = argmax_ranked(score, feasible, rank)
    if node is None:
        return None
    return Placement(node, gpus.tightest(state, node, job))


class ScoredFit:
    """A policy that scores every node from its free (CPU, GPU) vectors and takes the best
    (ties to the run's node ranking): best fit and dot product differ only in the score."""

    name = "scored-fit"

    def __init__(self, ctx: PolicyContext) -> None:
        self._rank = ctx.tie_rank

    def score(self, cpu: FloatArray, gpu: FloatArray, job: JobSpec) -> FloatArray:
        raise NotImplementedError

    def choose(
        self, state: ClusterState, job: JobSpec, feasible: BoolArray, rng: np.random.Generator
    ) -> Placement | None:
        cpu, gpu = free_vectors(state)
        return best_scored(state, job, self.score(cpu, gpu, job), feasible, self._rank)
