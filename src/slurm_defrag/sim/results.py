"""Summaries over seeds: mean, standard deviation, min and max of one figure per group,
and (Protocol B) each run's worst class of job against first fit of the same seed."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from slurm_defrag.sim.protocol_a import ResultA
from slurm_defrag.sim.protocol_b import ResultB
from slurm_defrag.sim.wait_classes import class_ratios, worst_class

R = TypeVar("R")


@dataclass(frozen=True)
class Spread:
    mean: float
    std: float
    min: float
    max: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        a = np.asarray(values, dtype=np.float64)
        return cls(
            float(a.mean()),
            float(a.std(ddof=1)) if a.size > 1 else 0.0,
            float(a.min()),
            float(a.max()),
            int(a.size),
        )


def group(
    runs: Sequence[R], key: Callable[[R], tuple[object, ...]]
) -> dict[tuple[object, ...], list[R]]:
    """Runs by key, keys in first-seen order."""
    out: dict[tuple[object, ...], list[R]] = defaultdict(list)
    for r in runs:
        out[key(r)].append(r)
    return dict(out)


def summary_a(runs: Sequence[ResultA]) -> dict[tuple[object, ...], Spread]:
    return {
        k: Spread.of([r.final_unallocated_pct for r in v])
        for k, v in group(runs, lambda r: (r.policy, r.defrag)).items()
    }


FIGURES_B: dict[str, Callable[[ResultB], float]] = {
    "large_wait_h": lambda r: r.large_wait_mean_s / 3600.0,
    "large_wait_p95_h": lambda r: r.large_wait_p95_s / 3600.0,
    "wait_h": lambda r: r.wait_mean_s / 3600.0,
    "wait_p50_h": lambda r: r.wait_p50_s / 3600.0,
    "wait_p95_h": lambda r: r.wait_p95_s / 3600.0,
    "wait_p99_h": lambda r: r.wait_p99_s / 3600.0,
    "wait_max_h": lambda r: r.wait_max_s / 3600.0,
    "gpu_alloc_pct": lambda r: r.gpu_alloc_pct,
    "requeues": lambda r: float(r.requeues),
    "lost_pct": lambda r: r.lost_pct,
}
"""Protocol B figures, by the name used in tables and JSON."""


def summary_b(runs: Sequence[ResultB]) -> dict[tuple[object, ...], dict[str, Spread]]:
    return {
        k: {name: Spread.of([f(r) for r in v]) for name, f in FIGURES_B.items()}
        for k, v in group(runs, lambda r: (r.load, r.policy, r.defrag)).items()
    }


BASELINE = ("first-fit", "none")
"""(policy, defrag) every Protocol B run is compared with: Slurm's own first fit."""


def worst_classes(runs: Sequence[ResultB]) -> dict[tuple[object, ...], list[tuple[str, float]]]:
    """(load, policy, defrag) -> each run's worst class and its mean-wait ratio to the
    first-fit run of the same load and seed among ``runs`` (runs without one left out)."""
    base = {(r.load, r.seed): r for r in runs if (r.policy, r.defrag) == BASELINE}
    out: dict[tuple[object, ...], list[tuple[str, float]]] = defaultdict(list)
    for r in runs:
        b = base.get((r.load, r.seed))
        if b is None or (r.policy, r.defrag) == BASELINE:
            continue
        ratios = class_ratios(r.class_wait_s, b.class_wait_s, b.class_jobs)
        out[(r.load, r.policy, r.defrag)].append(worst_class(ratios))
    return dict(out)
