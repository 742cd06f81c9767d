"""Protocol B's input: a scaled-down cluster and a Poisson stream of trace jobs.

* Cluster: ``scale`` of each node shape (model, GPUs, CPU, memory) of the trace's node list,
  first nodes by name, so the mix of shapes is kept and the choice does not depend on
  the seed. A smaller cluster keeps a day of simulated time at a few tens of thousands of
  jobs.
* Jobs: drawn uniformly (with replacement) from the trace; run time = deletion - creation
  time, clipped to [1 s, ``max_runtime``] (a Slurm ``MaxTime``: openb's tail reaches 145
  days, longer than any horizon here).
* Arrivals: Poisson with rate load x GPU capacity / E[GPUs x run time], so the offered GPU
  load is ``load`` x the cluster's GPUs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from slurm_defrag.domain.units import MILLI
from slurm_defrag.sim.model import JobSpec, NodeSpec


def scale_cluster(nodes: Sequence[NodeSpec], scale: float) -> list[NodeSpec]:
    if not 0 < scale <= 1:
        raise ValueError("scale must be in (0, 1]")
    groups: dict[tuple[str, int, int, int], list[NodeSpec]] = defaultdict(list)
    for n in nodes:
        groups[(n.model, n.gpus, n.cpu_milli, n.memory_mib)].append(n)
    out: list[NodeSpec] = []
    for members in groups.values():
        keep = round(len(members) * scale)
        out += sorted(members, key=lambda n: n.name)[:keep]
    return sorted(out, key=lambda n: n.name)


def job_pool(trace: Sequence[JobSpec], max_runtime: float) -> list[JobSpec]:
    return [replace(j, duration=float(min(max(j.duration, 1.0), max_runtime))) for j in trace]


def arrival_rate(pool: Sequence[JobSpec], gpu_capacity_milli: int, load: float) -> float:
    """Jobs per second giving an offered GPU load of ``load`` x capacity."""
    work = float(np.mean([j.total_milli * j.duration for j in pool]))
    if work <= 0:
        raise ValueError("the job pool asks for no GPU time")
    return load * gpu_capacity_milli / work


def arrivals(
    pool: Sequence[JobSpec], rate: float, horizon: float, rng: np.random.Generator
) -> list[JobSpec]:
    """Jobs submitted in [0, horizon), in submit order, named ``<trace name>@<i>``."""
    out: list[JobSpec] = []
    t = float(rng.exponential(1.0 / rate))
    while t < horizon:
        pick = pool[int(rng.integers(len(pool)))]
        out.append(replace(pick, name=f"{pick.name}@{len(out)}", submit=t))
        t += float(rng.exponential(1.0 / rate))
    return out


def gpu_hours(job: JobSpec, seconds: float) -> float:
    return job.total_milli / MILLI * seconds / 3600.0
