"""Which nodes the planner is shown when one job waits in a big simulated cluster.

Protocol A calls the planner after every failed placement -- about 1,400 times per run on
openb's 1,213 nodes. Turning the whole cluster into a snapshot each time costs more than
the plan, so the step shows the planner only the ``k`` nodes where freeing room for the
job looks cheapest. The ranking is a lower bound of the planner's own cost under
``cost_by_share``: the GPU capacity held on the job's ``num_gpu`` least-used GPUs of the
node (what requeueing them at the least would take away). CPUs, memory and NVLink are
left to the planner, which chooses among the nodes kept. A heuristic: the cheapest
feasible placement may lie outside the ``k`` nodes (``bench/sim_scope_check.py`` compares
scopes on one seed).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from slurm_defrag.sim.cluster_state import ClusterState, IntArray
from slurm_defrag.sim.defrag import RunningJob
from slurm_defrag.sim.model import JobSpec


def movable_host(
    state: ClusterState, running: Mapping[int, RunningJob]
) -> tuple[IntArray, IntArray]:
    """Per node, (CPU milli, MiB) that requeueing its GPU jobs could free."""
    cpu = np.zeros(state.size, dtype=np.int64)
    mem = np.zeros(state.size, dtype=np.int64)
    for r in running.values():
        if r.job.num_gpu:
            cpu[r.where.node] += r.job.cpu_milli
            mem[r.where.node] += r.job.memory_mib
    return cpu, mem


def cheapest_nodes(
    state: ClusterState, job: JobSpec, k: int, movable: tuple[IntArray, IntArray]
) -> tuple[int, ...]:
    """Indices of up to ``k`` nodes where ``job`` could run after requeueing GPU jobs (GPU
    count, model, and CPUs and memory that are free or held by GPU jobs; never one its
    ``--exclude`` names), cheapest first."""
    ok = (
        state.model_mask(job.gpu_models)
        & (state.gpu_count >= job.num_gpu)
        & (state.cpu_left + movable[0] >= job.cpu_milli)
        & (state.mem_left + movable[1] >= job.memory_mib)
    )
    if job.exclude:
        ok &= state.allowed(job.exclude)
    held = (state.gpu_cap - state.gpu_left).astype(np.float64)
    held[state.gpu_cap == 0] = np.inf  # GPU slots a node does not have
    lower = np.sort(held, axis=1)[:, : job.num_gpu].sum(axis=1)
    lower[~ok] = np.inf
    order = np.lexsort((np.arange(state.size), lower))
    return tuple(int(n) for n in order[:k] if np.isfinite(lower[n]))
