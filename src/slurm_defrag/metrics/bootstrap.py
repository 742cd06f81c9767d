"""Bootstrap confidence intervals of a before/after difference: seeded, pure Python.

The method (docs/reports.md, "How the intervals are computed"):

* each period is cut into consecutive blocks of time of one length (:func:`block_seconds`);
  a figure gives every block a *sum* and a *weight*: the waits of the jobs that started in
  the block and how many they are, the samples of a gauge and how many snapshots, events
  and the days the block covers;
* a period's estimate is its sums over its weights (a ratio estimator: a mean wait, a mean
  gauge, a rate per day), and the difference is after minus before;
* a resample draws, independently in each period, as many blocks as the period has, with
  replacement; :data:`RESAMPLES` resamples, drawn by ``random.Random`` seeded with the
  seed, the period and the block count, so one seed always gives the same interval;
* the interval is the 2.5th and 97.5th percentile of the resampled differences (nearest
  rank).

Blocks rather than single jobs or snapshots: a minute's snapshot is nearly the one before,
and jobs submitted together wait together; resampling blocks keeps that dependence inside
them, so the interval is not narrowed by counting one burst many times. With few blocks per
period (under ten) the percentile interval is too narrow: the report shows the block
counts beside it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

RESAMPLES = 1000
LEVEL = 0.95
DAY = 86400.0


def block_seconds(shortest_period_s: float, step_s: float = 60.0) -> float:
    """Block length for two periods the shorter of which lasts ``shortest_period_s``:
    a day when it spans a week or more (whole days keep the daily cycle in each block),
    else a 24th of it, never shorter than one snapshot step."""
    if shortest_period_s >= 7 * DAY:
        return DAY
    return max(step_s, shortest_period_s / 24)


@dataclass(frozen=True)
class Blocks:
    """One figure over the blocks of one period: per block a sum and a weight."""

    sums: tuple[float, ...]
    weights: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.sums) != len(self.weights):
            raise ValueError("one weight per block")

    def estimate(self) -> float | None:
        weight = sum(self.weights)
        return sum(self.sums) / weight if weight else None


@dataclass(frozen=True)
class Interval:
    before: float | None
    after: float | None
    difference: float | None
    """after - before; None when either period has no data for the figure."""
    low: float | None
    high: float | None
    """The confidence interval of the difference; None without resamples to draw it from."""

    def scaled(self, factor: float) -> Interval:
        def s(x: float | None) -> float | None:
            return None if x is None else x * factor

        return Interval(
            s(self.before), s(self.after), s(self.difference), s(self.low), s(self.high)
        )


class Resampler:
    """Draws the block indices of every resample, once per (period, block count): every
    figure of a report is resampled with the same draws."""

    def __init__(self, resamples: int = RESAMPLES, seed: int = 0) -> None:
        if resamples < 0:
            raise ValueError("resamples must be >= 0")
        self.resamples = resamples
        self.seed = seed
        self._draws: dict[tuple[int, int], list[list[int]]] = {}

    def draws(self, period: int, blocks: int) -> list[list[int]]:
        key = (period, blocks)
        found = self._draws.get(key)
        if found is None:
            rng = random.Random(f"{self.seed}:{period}:{blocks}")
            population = range(blocks)
            found = [rng.choices(population, k=blocks) for _ in range(self.resamples)]
            self._draws[key] = found
        return found

    def compare(self, before: Blocks, after: Blocks, level: float = LEVEL) -> Interval:
        b, a = before.estimate(), after.estimate()
        if a is None or b is None:
            return Interval(b, a, None, None, None)
        diffs = []
        sb, wb, sa, wa = before.sums, before.weights, after.sums, after.weights
        for ib, ia in zip(
            self.draws(0, len(sb)), self.draws(1, len(sa)), strict=True
        ):  # fmt: skip
            den_b = sum(map(wb.__getitem__, ib))
            den_a = sum(map(wa.__getitem__, ia))
            if den_b and den_a:
                diffs.append(
                    sum(map(sa.__getitem__, ia)) / den_a - sum(map(sb.__getitem__, ib)) / den_b
                )
        if not diffs:
            return Interval(b, a, a - b, None, None)
        diffs.sort()
        tail = (1 - level) / 2
        return Interval(b, a, a - b, _rank(diffs, tail), _rank(diffs, 1 - tail))


def _rank(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0..1) of sorted values."""
    i = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[i]
