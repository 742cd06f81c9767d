"""The wall cap of one plan, shared out among its stages (issue #42).

``[solver] max_time_in_seconds`` caps the whole plan, not only CP-SAT: on 20,000 nodes the
candidates alone took 135 s of a 60 s cap, and on 50,000 nodes no plan came at all. Each
stage may run until its share of the cap has passed (:data:`STAGE_ENDS`), checks it as it
goes, and past it stops with what it has: fewer candidates, the greedy plan instead of
CP-SAT's, shorter explanations. What was cut is recorded (``SolveStats.cut_short``) and
makes the plan non-deterministic and its bounds unproven. A plan that no stage cuts is
the same as without a cap.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Final, Literal

from slurm_defrag.domain.plan import SolveStats

Stage = Literal["candidates", "problem", "solve", "explain"]

STAGE_ENDS: Final[dict[Stage, float]] = {
    "candidates": 0.5,
    "problem": 0.6,
    "solve": 0.9,
    "explain": 0.97,
}
"""When each stage must stop, as a share of the cap from the start of the plan.
Candidates (eligibility, pruning, co-hosting bargains, the options) are most of the work
on big clusters; problem data and the model's construction follow; CP-SAT gets at least
the next 30 % (it stops on work long before on the benchmarks); explanations and the
plan's assembly the rest, with 3 % left for what follows them."""

CHECK_EVERY: Final = 256
"""Nodes between two looks at the clock in per-node loops (a look is ~0.1 us; a node's
work 10-500 us)."""


@dataclass
class Deadline:
    start: float
    """``time.perf_counter()`` at the start of the plan."""
    cap: float
    """Seconds: ``max_time_in_seconds``."""
    cut: list[str] = field(default_factory=list)
    """What was cut short, in the order it happened (``candidates``, ``solver``, ...)."""

    @classmethod
    def unlimited(cls) -> Deadline:
        """For callers without a cap (tests, benchmarks of one stage): never over."""
        return cls(0.0, float("inf"))

    def end(self, stage: Stage) -> float:
        """The ``time.perf_counter()`` value at which ``stage`` must stop."""
        return self.start + STAGE_ENDS[stage] * self.cap

    def over(self, stage: Stage) -> bool:
        return time.perf_counter() > self.end(stage)

    def note(self, what: str) -> None:
        """Record that ``what`` was cut short (once)."""
        if what not in self.cut:
            self.cut.append(what)


BY_INPUT: Final = frozenset({"options budget"})
"""Cuts decided by the input alone (the same every run), not by the clock."""


def unproven(stats: SolveStats, cut: list[str]) -> SolveStats:
    """``stats`` of a plan something was cut from: no bound is claimed (the relaxation's
    bounds hold for the candidates that were built, not for the problem), and not
    deterministic unless only the input decided the cut (:data:`BY_INPUT`)."""
    if not cut:
        return stats
    return stats.model_copy(
        update={
            "cut_short": tuple(cut),
            "deterministic": stats.deterministic and BY_INPUT.issuperset(cut),
            "optimality": "feasible" if stats.served else "none",
            "bound": None,
            "gap": None,
            "served_upper_bound": None,
            "value_upper_bound": None,
            "cost_lower_bound_gpu_hours": None,
            "cost_gap": None,
        }
    )
