"""The seam where the defrag planner plugs into the simulator.

Each scheduling cycle (Protocol B) or after a job fails to place (Protocol A) the engine
hands a :class:`DefragView` to a :class:`DefragStep` and applies the :class:`DefragPlan` it
returns: victims are requeued (their progress since their last checkpoint is lost, as for
``scontrol requeue``; a job without checkpoints loses all of it), then the plan's target
placements are tried, its *holds* are set up (a reservation of a GPU block for a target
that waits for the block's jobs to end: the service's drain plan, ``scontrol create
reservation``), then the normal scheduler runs. The engine, not the step, enforces the
requeue limit, the way the service's actuator does; a step that asks for more gets its
list cut to the limit.

:class:`NoDefrag` is the baseline (no defragmentation); :mod:`slurm_defrag.sim.planner_step`
adapts the real planner (:mod:`slurm_defrag.planner`) to this Protocol.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.model import JobSpec, Placement

REQUEUE_SHARE = 0.01
"""Default cap: requeue at most 1 % of running jobs per step (at least one)."""


@dataclass(frozen=True)
class RunningJob:
    job: JobSpec
    where: Placement
    start: float
    done: float = 0.0
    """Run time already saved by checkpoints before this start (it resumes from there)."""

    def last_checkpoint(self, now: float) -> float | None:
        """When the job last checkpointed in this run (None: not since it started)."""
        every = self.job.ckpt_interval
        if not every:
            return None
        n = int((now - self.start) // every)
        return self.start + n * every if n > 0 else None


@dataclass(frozen=True)
class DefragView:
    """What a step may look at. ``state`` must not be changed by the step."""

    now: float
    state: ClusterState
    running: Mapping[int, RunningJob]
    pending: Sequence[tuple[int, JobSpec]]
    max_requeues: int
    timed: bool = True
    """False in Protocol A: no time passes, every job "started" at 0, so elapsed time says
    nothing about what a requeue loses."""
    held: frozenset[int] = frozenset()
    """Pending jobs a reservation already holds a block for (not targets again)."""
    planned: Mapping[int, float] = field(default_factory=dict)
    """Pending job -> the start Slurm's backfill planned for it (none: no plan)."""


@dataclass(frozen=True)
class DefragPlan:
    """Jobs to requeue (by id), then where jobs (requeued or pending) should start."""

    requeue: tuple[int, ...] = ()
    place: Mapping[int, Placement] = field(default_factory=dict)
    hold: Mapping[int, Placement] = field(default_factory=dict)
    """Pending job -> the block to reserve for it until its jobs end (a drain)."""


class DefragStep(Protocol):
    name: str

    def plan(self, view: DefragView) -> DefragPlan: ...


class NoDefrag:
    """Does nothing: the packing-only and baseline runs."""

    name = "none"

    def plan(self, view: DefragView) -> DefragPlan:
        del view
        return DefragPlan()


def requeue_limit(running: int, share: float = REQUEUE_SHARE) -> int:
    return max(1, int(running * share)) if running else 0
