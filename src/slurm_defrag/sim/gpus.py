"""Which GPUs of the chosen node a job gets.

Four rules, named after what they imitate:

* :func:`lowest` — Slurm's ``cons_tres``: lowest free indices first (a shared job takes
  the lowest-indexed GPU with room); an NVLink job takes the free block with the lowest
  indices.
* :func:`tightest` — the FGD artifact's ``best`` rule: a shared job takes the GPU with the
  least room that still fits it; whole GPUs lowest-first.
* :func:`random_fit` — the artifact's ``random`` rule for shared jobs.
* :func:`block_preserving` — slurm-defrag's packing: fill partly used GPUs first and take
  whole GPUs so that the largest NVLink block left free is as large as possible.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from slurm_defrag.domain.topology import indices_of, mask_of, popcount
from slurm_defrag.domain.units import MILLI
from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.model import JobSpec


def _room(state: ClusterState, node: int, job: JobSpec) -> list[int]:
    row = state.gpu_left[node]
    return [g for g in range(int(state.gpu_count[node])) if row[g] >= job.gpu_milli]


def _blocks(state: ClusterState, node: int, job: JobSpec) -> list[tuple[int, ...]]:
    topo = state.topologies[node]
    return sorted(indices_of(b) for b in topo.free_blocks(state.full_mask(node), job.num_gpu))


def _whole_lowest(state: ClusterState, node: int, job: JobSpec) -> tuple[int, ...]:
    if job.nvlink and job.num_gpu > 1:
        blocks = _blocks(state, node, job)
        if not blocks:
            raise ValueError(f"job {job.name}: no free NVLink block on node {node}")
        return blocks[0]
    room = _room(state, node, job)
    if len(room) < job.num_gpu:
        raise ValueError(f"job {job.name}: node {node} has {len(room)} free GPUs")
    return tuple(room[: job.num_gpu])


def lowest(state: ClusterState, node: int, job: JobSpec) -> tuple[int, ...]:
    if job.num_gpu == 0:
        return ()
    if job.shared:
        return (_room(state, node, job)[0],)
    return _whole_lowest(state, node, job)


def tightest(state: ClusterState, node: int, job: JobSpec) -> tuple[int, ...]:
    if job.shared:
        row = state.gpu_left[node]
        return (min(_room(state, node, job), key=lambda g: (row[g], g)),)
    return lowest(state, node, job)


def random_fit(
    state: ClusterState, node: int, job: JobSpec, rng: np.random.Generator
) -> tuple[int, ...]:
    if job.shared:
        room = _room(state, node, job)
        return (room[int(rng.integers(len(room)))],)
    return lowest(state, node, job)


def block_preserving(state: ClusterState, node: int, job: JobSpec) -> tuple[int, ...]:
    """See the module docstring; deterministic (lowest indices break ties)."""
    if job.num_gpu == 0:
        return ()
    row = state.gpu_left[node]
    topo = state.topologies[node]
    full = state.full_mask(node)
    if job.shared:
        partial = [g for g in _room(state, node, job) if row[g] < MILLI]
        if partial:
            return (min(partial, key=lambda g: (row[g], g)),)
        candidates: list[tuple[int, ...]] = [(g,) for g in indices_of(full)]
    elif job.nvlink and job.num_gpu > 1:
        candidates = _blocks(state, node, job)
    else:
        candidates = [tuple(c) for c in combinations(indices_of(full), job.num_gpu)]
    if not candidates:
        raise ValueError(f"job {job.name}: no GPUs for it on node {node}")

    def keep(c: tuple[int, ...]) -> tuple[int, int, bool, tuple[int, ...]]:
        rest = full & ~mask_of(c)
        paired = popcount(topo.gpus_in_free_blocks(rest, frozenset({2})))
        return (-topo.largest_free_block(rest), -paired, not topo.is_block(c), c)

    return min(candidates, key=keep)
