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

    @property
    def has_solution(self) -> bool:
        return self.status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE)
