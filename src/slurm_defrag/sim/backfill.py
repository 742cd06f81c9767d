"""EASY backfill's reservation: when and where could the blocked job start?

Slurm's backfill scheduler plans the top pending jobs into the future using running jobs'
time limits and lets lower-priority jobs start now only if they do not delay those plans.
Here one job is planned (EASY backfill, Slurm's ``bf_max_job_test``-style depth for the
rest): for each node that could ever host it, release that node's running jobs in order
of their expected end until the job fits; the earliest such time is the *shadow time* and
that node is reserved. Expected end = start + :attr:`JobSpec.estimate` (the run time
unless a time limit is set: perfect estimates by default; real users over-estimate, which
makes backfill less effective than here).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from slurm_defrag.sim.cluster import ClusterState, IntArray
from slurm_defrag.sim.defrag import RunningJob
from slurm_defrag.sim.model import JobSpec


@dataclass(frozen=True)
class Reservation:
    node: int
    start: float


def _fits(cpu: int, mem: int, row: IntArray, job: JobSpec) -> bool:
    if cpu < job.cpu_milli or mem < job.memory_mib:
        return False
    return not job.num_gpu or int((row >= job.gpu_milli).sum()) >= job.num_gpu


def reserve(
    state: ClusterState,
    job: JobSpec,
    on_node: Mapping[int, Iterable[int]],
    running: Mapping[int, RunningJob],
    now: float,
) -> Reservation | None:
    """Earliest (time, node) where ``job`` fits once running jobs end; None if never.

    NVLink needs are not checked against future free blocks (counts only): a reservation
    is a plan, the job still needs a real block when it starts.
    """
    capable = (
        (state.cpu_cap >= job.cpu_milli)
        & (state.mem_cap >= job.memory_mib)
        & (state.gpu_count >= job.num_gpu)
    )
    if job.num_gpu:
        capable &= state.model_mask(job.gpu_models)
    best: Reservation | None = None
    for n in np.flatnonzero(capable):
        node = int(n)
        cpu, mem = int(state.cpu_left[node]), int(state.mem_left[node])
        row = state.gpu_left[node].copy()
        ok = _fits(cpu, mem, row, job)
        when = now
        if not ok:
            ends = sorted(
                (running[i].start + running[i].job.estimate, i) for i in on_node.get(node, ())
            )
            for end, i in ends:  # release in order of expected end, cheapest first
                if best is not None and end >= best.start:
                    break
                r = running[i]
                cpu += r.job.cpu_milli
                mem += r.job.memory_mib
                for g in r.where.gpus:
                    row[g] += r.job.gpu_milli
                if _fits(cpu, mem, row, job):
                    ok, when = True, end
                    break
        if ok and (best is None or when < best.start):
            best = Reservation(node, max(when, now))
            if when <= now:
                break
    return best
