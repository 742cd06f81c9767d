"""The strategy interface: strategies look at a snapshot and propose targets; they never act.

A :class:`Candidate` is a pending job worth freeing GPUs for, with the strategy's reason.
The solver decides which candidates are served and how; the executor acts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from slurm_defrag.domain.cluster import ClusterSnapshot


@dataclass(frozen=True, slots=True)
class Candidate:
    job_id: str
    strategy: str
    reason: str


class Strategy(Protocol):
    name: str

    def propose(self, snapshot: ClusterSnapshot) -> list[Candidate]:
        """Targets for the planner, most deserving first."""
        ...
