"""The FGD fragmentation measure for fractional GPUs (Weng et al., USENIX ATC '23, §3).

Definitions, as in the paper and its artifact (``pkg/utils/frag.go`` of
hkust-adsl/kubernetes-scheduler-simulator):

* A *task type* m asks for CPU, ``num`` GPUs of ``milli`` each, optionally a GPU model.
* The fragment of node n for m, F_n(m), is the free milli-GPU of n that m cannot use:
  all of it when m cannot run on n at all (too little CPU, too few GPUs with ``milli`` free,
  wrong model, or m is a CPU-only task), otherwise the free capacity of the GPUs whose
  remainder is below ``milli``.
* The node's fragmentation is the expectation over the workload's task-type distribution,
  F_n = sum_m p_m F_n(m); the cluster's is the sum over nodes.
* FGD places a task where F rises least (the steepest descent of fragmentation).

The distribution is the artifact's "typical pods": the most frequent task types covering
at least 95 % of the workload's tasks (CPU-only tasks included), renormalised.

Vectorisation: for each distinct ``milli`` value v of the types, ``sum_ge[v]`` is the free
capacity on GPUs with at least v free and ``cnt_ge[v]`` their number; then
F_n = free_n - sum over GPU types t of p_t * fits_t * sum_ge[v_t], since CPU-only types
always count the whole free capacity.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from slurm_defrag.sim.cluster_state import BoolArray, ClusterState, IntArray
from slurm_defrag.sim.model import JobSpec

FloatArray = npt.NDArray[np.float64]

TYPICAL_COVERAGE = 0.95
"""Share of tasks the typical types must cover (the artifact's ``podPopularityThreshold``)."""


@dataclass(frozen=True, slots=True)
class TaskType:
    cpu_milli: int
    num_gpu: int
    gpu_milli: int
    gpu_models: frozenset[str] | None
    weight: float


def _type_key(j: JobSpec) -> tuple[int, int, int, frozenset[str] | None]:
    return (j.cpu_milli, j.num_gpu, j.gpu_milli, j.gpu_models)


def typical_types(
    jobs: Sequence[JobSpec], coverage: float = TYPICAL_COVERAGE
) -> tuple[TaskType, ...]:
    """Most frequent task types covering ``coverage`` of ``jobs``, weights summing to 1.

    Ties in frequency are broken like the artifact (``sort.Reverse`` of ascending
    (count, cpu, milli, num, model)), so the cut-off keeps the same types.
    """
    if not jobs:
        raise ValueError("the workload has no jobs")
    counts = Counter(_type_key(j) for j in jobs)

    def order(item: tuple[tuple[int, int, int, frozenset[str] | None], int]) -> tuple[object, ...]:
        (cpu, num, milli, models), n = item
        return (n, cpu, milli, num, "|".join(sorted(models)) if models else "")

    ranked = sorted(counts.items(), key=order, reverse=True)
    total = len(jobs)
    kept: list[tuple[tuple[int, int, int, frozenset[str] | None], int]] = []
    covered = 0
    for item in ranked:
        if covered >= coverage * total:
            break
        kept.append(item)
        covered += item[1]
    return tuple(
        TaskType(cpu_milli=k[0], num_gpu=k[1], gpu_milli=k[2], gpu_models=k[3], weight=n / covered)
        for k, n in kept
    )


class FragModel:
    """The measure for one cluster and one task-type distribution, ready to vectorise."""

    def __init__(self, state: ClusterState, types: Sequence[TaskType]) -> None:
        self.types = tuple(types)
        gpu_types = [t for t in self.types if t.num_gpu > 0]
        self._values = np.array(sorted({t.gpu_milli for t in gpu_types}), dtype=np.int64)
        index = {int(v): i for i, v in enumerate(self._values)}
        self._vidx = np.array([index[t.gpu_milli] for t in gpu_types], dtype=np.int64)
        self._cpu = np.array([t.cpu_milli for t in gpu_types], dtype=np.int64)
        self._num = np.array([t.num_gpu for t in gpu_types], dtype=np.int64)
        self._p = np.array([t.weight for t in gpu_types], dtype=np.float64)
        # access[model code, type]: may a type run on a node of that GPU model?
        self._access = np.array(
            [[t.gpu_models is None or m in t.gpu_models for t in gpu_types] for m in state.models],
            dtype=np.bool_,
        ).reshape(len(state.models), len(gpu_types))
        self._cpu_only = sum(t.weight for t in self.types if t.num_gpu == 0)

    @cached_property
    def has_gpu_types(self) -> bool:
        return len(self._p) > 0

    def node_frag(self, cpu_left: IntArray, gpu_left: IntArray, model_idx: IntArray) -> FloatArray:
        """F_n in milli-GPUs for each row (``gpu_left`` has one row per node or hypothesis)."""
        free: FloatArray = gpu_left.sum(axis=1).astype(np.float64)
        if not self.has_gpu_types:
            return free
        ge = gpu_left[:, :, None] >= self._values[None, None, :]
        cnt_ge = ge.sum(axis=1)
        sum_ge = np.where(ge, gpu_left[:, :, None], 0).sum(axis=1)
        fits = (
            (cpu_left[:, None] >= self._cpu[None, :])
            & (cnt_ge[:, self._vidx] >= self._num[None, :])
            & self._access[model_idx]
        )
        usable: FloatArray = (fits * sum_ge[:, self._vidx] * self._p[None, :]).sum(axis=1)
        frag: FloatArray = free - usable
        return frag

    def placement_delta(self, state: ClusterState, nodes: IntArray, job: JobSpec) -> FloatArray:
        """Rise of F_n if ``job`` started on each of ``nodes``: shape (len(nodes), columns).

        A shared-GPU job has one column per GPU slot (the rise if it took that GPU); any
        other job has one column, since whole GPUs are interchangeable for the measure
        (it depends on the multiset of remainders only). Impossible choices are +inf.
        """
        cpu = state.cpu_left[nodes]
        gl = state.gpu_left[nodes]
        models = state.model_idx[nodes]
        before = self.node_frag(cpu, gl, models)
        cpu_after = cpu - job.cpu_milli
        k, width = gl.shape
        if job.shared:
            hyp = np.repeat(gl[:, None, :], width, axis=1)  # (k, choice, slot)
            diag = np.arange(width)
            hyp[:, diag, diag] -= job.gpu_milli
            after = self.node_frag(
                np.repeat(cpu_after, width), hyp.reshape(k * width, width), np.repeat(models, width)
            ).reshape(k, width)
            shared: FloatArray = np.where(gl >= job.gpu_milli, after - before[:, None], np.inf)
            return shared
        if job.num_gpu:
            whole = gl >= job.gpu_milli
            take = whole & (np.cumsum(whole, axis=1) <= job.num_gpu)
            gl_after = gl - take * job.gpu_milli
            ok = whole.sum(axis=1) >= job.num_gpu
        else:
            gl_after = gl
            ok = np.ones(k, dtype=np.bool_)
        after = self.node_frag(cpu_after, gl_after, models)
        single: FloatArray = np.where(ok, after - before, np.inf)[:, None]
        return single

    def cluster_frag(self, state: ClusterState) -> float:
        """Sum of F_n over all nodes, in milli-GPUs."""
        return float(self.node_frag(state.cpu_left, state.gpu_left, state.model_idx).sum())


def stale(version_seen: IntArray, state: ClusterState) -> IntArray:
    """Nodes changed since a cache recorded ``version_seen``."""
    changed: BoolArray = version_seen != state.version
    return np.flatnonzero(changed).astype(np.int64)
