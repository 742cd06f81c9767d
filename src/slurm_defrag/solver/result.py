"""What one CP-SAT solve returns, in problem indices."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class SolveStatus(StrEnum):
    OPTIMAL = "OPTIMAL"
    FEASIBLE = "FEASIBLE"
    INFEASIBLE = "INFEASIBLE"
    UNKNOWN = "UNKNOWN"
    MODEL_INVALID = "MODEL_INVALID"

    @classmethod
    def from_cp_sat(cls, name: str) -> SolveStatus:
        try:
            return cls(name)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class SolveResult:
    status: SolveStatus
    objective: int | None = None
    bound: int | None = None
    runtime_s: float = 0.0
    taken: tuple[int, ...] = ()
    requeued: tuple[int, ...] = ()
    served: tuple[int, ...] = ()
    value_bound: int | None = None
    """Proven upper bound of the value any plan can serve (sum of target values)."""
    cost: int | None = None
    """Victims' cost plus drain idle time of this plan, milli-GPU-hours."""
    cost_bound: int | None = None
    """Proven lower bound of that cost for any plan serving at least this plan's value."""
    work: float = 0.0
    """CP-SAT deterministic time spent."""
    wall_capped: bool = False
    """A CP-SAT call stopped on the wall clock (then the plan may differ between runs)."""

    @property
    def has_solution(self) -> bool:
        return self.status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE)
