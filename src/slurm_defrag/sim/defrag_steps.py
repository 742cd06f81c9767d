"""The defrag steps by name: each a typed set of planner parameters, not a parsed string.

A step is chosen by its registered name (:data:`STEPS`) and, for the steps that target
large jobs, its limits (:class:`StepLimits`, a profile's ``[defrag]`` table). The registry
maps a name to the :class:`PlannerParams` the :class:`~slurm_defrag.sim.planner_step.
PlannerStep` is built from (``None``: no defragmentation), as KAI-scheduler's and
Volcano's plugin factories map a name to typed arguments. This module imports nothing
heavy: the profile loader checks names against it without loading the simulator.

The steps:

``planner``: every pending whole-GPU job at the head of the queue is a target, and GPUs
shared by fractional jobs can be freed (their jobs requeued together).
``planner-large``: only jobs of at least 4 GPUs are, and running jobs that large are never
victims -- the setting for Protocol B's large-job goal.
``planner-harm``: ``planner-large`` that counts the harm: a victim's cost adds its wait
after requeue (``cost.requeue_wait_weight`` = 1, :func:`~slurm_defrag.policy.cost.
restart_wait_hours`), its checkpoint (``defrag:ckpt``) cuts its lost work, and drain plans
are on: a block whose blockers' time limits end within ``drain.max_wait_hours`` is held
for the target by a reservation instead of requeueing them.
``planner-gain``: ``planner-harm`` that also weighs what the target gains: an option is
kept only if it costs at most the GPU-hours of wait it saves the target, counted to the
start Slurm's backfill planned for it (``cost.target_wait_weight`` = 1,
:func:`~slurm_defrag.policy.cost.wait_saved_hours`), and a drain only if it starts the
target sooner than that plan.
``planner-big``: ``planner-gain`` in which running jobs of 4 to 7 GPUs may be victims too
(only jobs of a whole 8-GPU node never are): where most GPUs are held by jobs of at least
4 GPUs (openb ``multigpu50``), ``planner-large``'s rule leaves an 8-GPU job no victim at
all; the gain gate and the checkpoints then decide whether a smaller large job is worth it.
``planner-wait``: ``planner-harm`` without drains: the victim's wait is in its cost, but
no block is held for a target (with Slurm's own backfill planning every pending job,
``--backfill all``, a planned large job already has its node held by backfill).
``planner-gain-wait``: ``planner-gain`` without drains: only requeues that save their
target at least the wait they cost, and no block held (holds undo job_submit.lua's queue
order: the held node waits for the planner's pick, not the next job of the order).
``planner-drain``: ``planner-harm`` with no victim at all (``max_victims_per_plan`` = 0):
blocks are only held until their blockers end, so no work is ever lost.

The limits of every step after ``planner``: ``max_lost_gpu_hours``, at most that many
GPU-hours of work lost per plan (``limits.max_gpu_hours_lost_per_plan``), cheaper plans
or drains otherwise; ``max_hold_hours``, blocks held only for blockers ending within that
many hours (``drain.max_wait_hours``, default 2); ``queue_head``, targets only among the
first that many jobs of the queue (:class:`StepLimits`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

LARGE_GPUS = 4
"""Protocol B's large jobs: at least this many GPUs."""

BIG_KEEP_GPUS = 8
"""``planner-big``: running jobs of this many GPUs (a whole 8-GPU node) are never victims."""

SCOPE_NODES = 32
"""``planner``: nodes shown per target in a big cluster (see :mod:`slurm_defrag.sim.scope`)."""


@dataclass(frozen=True)
class PlannerParams:
    """What a :class:`~slurm_defrag.sim.planner_step.PlannerStep` is built from."""

    max_targets: int = 10
    min_gpus: int = 1
    shared_victims: bool = False
    scope_nodes: int | None = None
    solver_workers: int | None = None
    harm: bool = False
    drains: bool | None = None
    drain_only: bool = False
    max_lost_gpu_hours: float | None = None
    gain: bool = False
    keep_gpus: int | None = None
    max_hold_hours: float | None = None
    queue_head: int | None = None


@dataclass(frozen=True)
class StepLimits:
    """The limits a profile's ``[defrag]`` table sets on a large-job step (None: the
    policy's default)."""

    max_lost_gpu_hours: float | None = None
    """At most this many GPU-hours of work lost per plan."""
    max_hold_hours: float | None = None
    """Blocks held only for blockers ending within this many hours."""
    queue_head: int | None = None
    """Targets only among the first this many jobs of the queue, whatever their size
    (None: anywhere in it). Under a site's priorities a large job further back waits for
    its turn, not for fragmentation: freeing a block for it would overtake the jobs ahead
    of it, against their users' fair-share (issue #41; the service's ``free-nvlink-block``
    strategy's ``queue_head``)."""


_L = LARGE_GPUS
STEPS: dict[str, PlannerParams | None] = {
    "none": None,
    "planner": PlannerParams(shared_victims=True, scope_nodes=SCOPE_NODES, solver_workers=1),
    "planner-large": PlannerParams(min_gpus=_L, drains=False),
    "planner-harm": PlannerParams(min_gpus=_L, harm=True, drains=True),
    "planner-gain": PlannerParams(min_gpus=_L, harm=True, drains=True, gain=True),
    "planner-big": PlannerParams(
        min_gpus=_L, harm=True, drains=True, gain=True, keep_gpus=BIG_KEEP_GPUS
    ),
    "planner-wait": PlannerParams(min_gpus=_L, harm=True, drains=False),
    "planner-drain": PlannerParams(min_gpus=_L, harm=True, drains=True, drain_only=True),
    "planner-gain-wait": PlannerParams(min_gpus=_L, harm=True, drains=False, gain=True),
}
"""Every defrag step, by the name used in profiles, on the command line and in results."""

LIMITED = tuple(n for n, p in STEPS.items() if p is not None and p.min_gpus == LARGE_GPUS)
"""The steps that take :class:`StepLimits` (the large-job ones)."""


NO_LIMITS = StepLimits()


def step_params(name: str, limits: StepLimits = NO_LIMITS) -> PlannerParams | None:
    """The parameters of step ``name`` with ``limits``; ValueError names what is wrong."""
    if name not in STEPS:
        raise ValueError(f"unknown defrag step {name!r}; choose from {', '.join(STEPS)}")
    params = STEPS[name]
    if limits == NO_LIMITS:
        return params
    if params is None or name not in LIMITED:
        raise ValueError(
            f"defrag step {name!r} takes no limits (max_lost_gpu_hours, max_hold_hours, "
            f"queue_head): only {', '.join(LIMITED)} do"
        )
    return replace(
        params,
        max_lost_gpu_hours=limits.max_lost_gpu_hours,
        max_hold_hours=limits.max_hold_hours,
        queue_head=limits.queue_head,
    )
