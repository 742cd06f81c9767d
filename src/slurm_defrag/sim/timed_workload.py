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


# -- what users ask for: time limits and checkpoints -------------------------------------

ROUND_LIMITS_MIN = (5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 360, 480, 600, 720, 1080, 1440)
"""The few round values users request, in minutes (Tsafrir, Etsion & Feitelson 2005,
"Modeling User Runtime Estimates", JSSPP: in every log they studied about 20 values cover
90 % of the jobs, and those values are round -- 5, 10, 15, 30 min, 1, 2, 4, 8, 12, 18,
24 h and the partition's maximum)."""
EXACT_SHARE = 0.15
"""Share of jobs whose limit is the smallest round value that covers the run time (the
mode near accuracy 1 in Tsafrir et al.: jobs killed at, or ending just before, their
limit; 10-20 % in their logs)."""


def user_time_limit(duration: float, max_time: float, rng: np.random.Generator) -> float:
    """A time limit as a user sets it for a job that runs ``duration`` s (``MaxTime``:
    ``max_time``).

    After Tsafrir, Etsion & Feitelson 2005: accuracy (run time / limit) has a mode at 1
    (:data:`EXACT_SHARE` of jobs) and is otherwise spread roughly uniformly over (0, 1)
    -- many jobs use a small fraction of what they asked for; the estimate run time /
    accuracy is then rounded *up* to one of the round values users pick
    (:data:`ROUND_LIMITS_MIN`) and capped at ``max_time`` (Slurm refuses more). Never
    below the run time (a job killed at its limit is not modelled: its run time would be
    the limit).
    """
    accuracy = 1.0 if rng.random() < EXACT_SHARE else float(rng.uniform(0.02, 1.0))
    want = duration / accuracy
    limit = next((m * 60.0 for m in ROUND_LIMITS_MIN if m * 60.0 >= want), max_time)
    return max(duration, min(limit, max_time))


CKPT_INTERVAL_S = 1800.0
"""A checkpointing job writes a checkpoint every 30 min of run time (issue #14)."""


def with_user_limits(
    jobs: Sequence[JobSpec],
    max_time: float,
    ckpt_share: float,
    rng: np.random.Generator,
) -> list[JobSpec]:
    """``jobs`` with time limits drawn by :func:`user_time_limit` and a ``ckpt_share``
    of them checkpointing every :data:`CKPT_INTERVAL_S` (seeded by ``rng``)."""
    out = []
    for j in jobs:
        limit = user_time_limit(j.duration, max_time, rng)
        ckpt = CKPT_INTERVAL_S if rng.random() < ckpt_share else None
        out.append(replace(j, time_limit=limit, ckpt_interval=ckpt))
    return out


def durations_by_gpus(
    jobs: Sequence[JobSpec], reference: Sequence[JobSpec], rng: np.random.Generator
) -> list[JobSpec]:
    """Give untimed jobs (openb's multigpu* files: duration 0) run times drawn from the
    ``reference`` trace's run times of jobs with the same GPU count (whole GPUs vs shares
    apart); a GPU count the reference lacks draws from its largest one present. The
    multigpu* files only re-weight the default trace's job mix towards multi-GPU jobs (FGD
    artifact), so the default's run time per size is the natural distribution."""
    by: dict[tuple[int, bool], list[float]] = defaultdict(list)
    for r in reference:
        by[(r.num_gpu, r.shared)].append(r.duration)
    keys = sorted(by)
    out = []
    for j in jobs:
        key = (j.num_gpu, j.shared)
        if key not in by:
            same = [k for k in keys if k[1] == j.shared and k[0] <= j.num_gpu] or keys
            key = same[-1]
        pool = by[key]
        out.append(replace(j, duration=pool[int(rng.integers(len(pool)))]))
    return out
