"""Who waits: the tail of the wait distribution and the mean wait per class of job.

Issue #41 ("goals on the tail"): a mean over all jobs hides that some jobs pay for the
others, so every Protocol B run also reports

* the mean, median, 95th and 99th percentile and largest wait of all measured jobs
  (percentiles interpolate linearly between order statistics, numpy's default);
* the mean wait per class: the quarter of the time limits a job is in (``limit Q1`` the
  shortest quarter ... ``limit Q4`` the longest; jobs ranked by limit, then by submission,
  and cut into four equal parts, so every run of one workload and seed has the same
  classes), its GPU count (``gpus 0`` for CPU only, ``gpus 1`` for one GPU or a share of
  one, ``gpus 2-3``, ``gpus 4-7``, ``gpus 8+``) and its user, for the ``HEAVY_USERS``
  users who asked for the most GPU-hours (``user <name>``).

A class's ratio compares its mean with the same class's under a baseline (first fit);
classes with fewer than ``MIN_CLASS_JOBS`` jobs in the baseline are left out of the worst
ratio (a handful of waits is noise, not a class).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from slurm_defrag.domain.units import MILLI
from slurm_defrag.sim.model import JobSpec

LIMIT_QUARTERS = 4
HEAVY_USERS = 10
MIN_CLASS_JOBS = 20
GPU_CLASSES: tuple[tuple[int, float, str], ...] = (
    (0, 0, "gpus 0"),
    (1, 1, "gpus 1"),
    (2, 3, "gpus 2-3"),
    (4, 7, "gpus 4-7"),
    (8, math.inf, "gpus 8+"),
)
"""(fewest, most, name): GPUs a job asks for, a shared GPU counting as one."""


@dataclass(frozen=True)
class Tail:
    mean: float = 0.0
    p50: float = 0.0
    p95: float = 0.0
    p99: float = 0.0
    max: float = 0.0

    @classmethod
    def of(cls, waits: Sequence[float]) -> Tail:
        if not len(waits):
            return cls()
        a = np.asarray(waits, dtype=np.float64)
        p50, p95, p99 = np.percentile(a, [50, 95, 99])
        return cls(float(a.mean()), float(p50), float(p95), float(p99), float(a.max()))


def gpu_class(job: JobSpec) -> str:
    for lo, hi, name in GPU_CLASSES:
        if lo <= job.num_gpu <= hi:
            return name
    raise AssertionError(f"job {job.name}: {job.num_gpu} GPUs in no class")


def heavy_users(jobs: Sequence[JobSpec], n: int = HEAVY_USERS) -> list[str]:
    """The ``n`` users who asked for the most GPU-hours (ties by name); none without users."""
    asked: dict[str, float] = defaultdict(float)
    for j in jobs:
        if j.user:
            asked[j.user] += j.total_milli / MILLI * j.duration
    return sorted(asked, key=lambda u: (-asked[u], u))[:n]


def classes(jobs: Sequence[JobSpec]) -> dict[str, list[int]]:
    """Class name -> indices into ``jobs``, in the order the module docstring gives."""
    out: dict[str, list[int]] = {}
    by_limit = sorted(range(len(jobs)), key=lambda i: (jobs[i].estimate, i))
    for q, part in enumerate(np.array_split(np.asarray(by_limit, dtype=np.int64), LIMIT_QUARTERS)):
        out[f"limit Q{q + 1}"] = [int(i) for i in part]
    for _, _, name in GPU_CLASSES:
        out[name] = []
    heavy = heavy_users(jobs)
    for u in heavy:
        out[f"user {u}"] = []
    members = set(heavy)
    for i, j in enumerate(jobs):
        out[gpu_class(j)].append(i)
        if j.user in members:
            out[f"user {j.user}"].append(i)
    return out


def class_means(
    jobs: Sequence[JobSpec], waits: Sequence[float]
) -> tuple[dict[str, float], dict[str, int]]:
    """Mean wait and number of jobs per class (classes without jobs left out)."""
    means: dict[str, float] = {}
    counts: dict[str, int] = {}
    for name, idx in classes(jobs).items():
        if idx:
            means[name] = float(np.mean([waits[i] for i in idx]))
            counts[name] = len(idx)
    return means, counts


def ratio(value: float, base: float) -> float:
    """``value / base``; 1 when both are 0, infinite when only the base is."""
    if base > 0:
        return value / base
    return 1.0 if value <= 0 else math.inf


def class_ratios(
    means: Mapping[str, float],
    base_means: Mapping[str, float],
    base_counts: Mapping[str, int],
    min_jobs: int = MIN_CLASS_JOBS,
) -> dict[str, float]:
    """Each class's mean wait over the baseline's, for classes both have and the baseline
    holds at least ``min_jobs`` jobs of."""
    return {
        k: ratio(v, base_means[k])
        for k, v in means.items()
        if k in base_means and base_counts.get(k, 0) >= min_jobs
    }


def worst_class(ratios: Mapping[str, float]) -> tuple[str, float]:
    """The class with the highest ratio (ties by name); ("", 1.0) when there is none."""
    if not ratios:
        return "", 1.0
    name = max(sorted(ratios), key=lambda k: ratios[k])
    return name, ratios[name]
