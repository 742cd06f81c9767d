"""Turning a trace into the job sequence of an experiment.

Protocol A reproduces the FGD artifact's workload tuning (``TunePodsByNodeTotalResource``
and ``SortClusterPods`` in ``pkg/simulator/simulator.go``): the trace's pods, sorted by
name and shuffled with the seed, followed by copies of pods drawn uniformly from the trace
until the GPU demand reaches ``ratio`` x the cluster's GPU capacity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from slurm_defrag.sim.model import JobSpec


def inflate(
    trace: Sequence[JobSpec],
    capacity_milli: int,
    ratio: float,
    rng: np.random.Generator,
    shuffle: bool = True,
) -> list[JobSpec]:
    """The Protocol A arrival sequence (see module docstring).

    ``shuffle=False`` keeps trace order (by submit time, then name) for the trace's own
    pods. Stopping rule as in the artifact: draw until the next draw's *per-GPU* milli
    would pass the target (so a multi-GPU draw may overshoot by a few GPUs).
    """
    by_name = sorted(trace, key=lambda j: j.name)
    if shuffle:
        jobs = [by_name[i] for i in rng.permutation(len(by_name))]
    else:
        jobs = sorted(trace, key=lambda j: (j.submit, j.name))
    target = ratio * capacity_milli
    total = sum(j.total_milli for j in jobs)
    while total > target and jobs:
        total -= jobs.pop(int(rng.integers(len(jobs)))).total_milli
    i = 0
    while total < target:
        pick = by_name[int(rng.integers(len(by_name)))]
        if total + pick.gpu_milli > target:
            break
        jobs.append(replace(pick, name=f"{pick.name}-tuned-{i}"))
        total += pick.total_milli
        i += 1
    return jobs
