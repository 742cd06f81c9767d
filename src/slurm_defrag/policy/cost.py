"""What requeueing a running job costs: the GPU-hours of work it loses, weighted, plus a
fixed restart cost.

Lost work runs from the job's last declared checkpoint (``defrag:ckpt=``, see
:mod:`slurm_defrag.policy.comment_keys`) or, without one, from its start. A job spanning
several nodes is requeued whole: all its GPUs count. The weight is the product of the
policy's QOS weight and partition weight (1.0 when not listed), so an operator can make
"scavenger" work cheap to requeue and production work dear.

With ``requeue_wait_weight`` > 0 the cost also counts the harm a requeue does after the
fact: the wait the victim suffers before it runs again (:func:`restart_wait_hours`),
in GPU-hours (its GPUs x the estimated wait), times that weight. A victim that can
start again at once on free GPUs elsewhere costs little more than its lost work; one
that must queue behind running jobs costs its wait too -- which is what makes the
planner prefer draining a block whose blockers end soon, or a cheaper victim.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from slurm_defrag.domain.cluster import UNKNOWN_OWNER, ClusterSnapshot, Job
from slurm_defrag.domain.units import MILLI
from slurm_defrag.policy.comment_keys import last_checkpoint

Weight = Annotated[float, Field(ge=0)]


class CostConfig(BaseModel):
    """``[cost]`` of the policy file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    restart_cost_gpu_hours: Annotated[float, Field(ge=0)] = 0.1
    """Added per victim: scheduling, staging and warm-up a requeued job pays again."""
    qos_weights: dict[str, Weight] = Field(default_factory=dict)
    partition_weights: dict[str, Weight] = Field(default_factory=dict)
    requeue_wait_weight: Weight = 0.0
    """Weight of the victim's estimated wait after requeue (its GPUs x hours until a spot
    frees, by time limits; :func:`restart_wait_hours`). 0: lost work only."""
    max_wait_hours: Annotated[float, Field(ge=0)] = 24.0
    """Cap of that estimate (no spot within the time limits known: this long)."""
    target_wait_weight: Weight = 0.0
    """> 0: a plan must be worth the wait it saves its target. Each share's requeue
    option may cost at most this weight x the target's GPUs x the hours the target would
    wait anyway (until slurmctld's planned start, :attr:`Job.planned_start`; without one,
    ``max_wait_hours``), divided by its number of nodes; a drain must start it sooner
    than that plan. 0: any cost within the limits (the target's wait is not looked at).
    A per-option test: a multi-node victim's cost counts on each share it frees, and a
    drain's idle GPU-hours are not weighed against the gain (docs/planner.md)."""


@dataclass(frozen=True, slots=True)
class VictimCost:
    lost_gpu_hours: float
    """GPUs held (all nodes) x hours since ``since``; unweighted, what limits count."""
    weight: float
    cost: float
    """``lost_gpu_hours * weight + restart``: what the planner minimises."""
    since: datetime
    since_source: Literal["start", "checkpoint"]
    wait_hours: float = 0.0
    """Estimated wait before it runs again (counted only with ``requeue_wait_weight``)."""


def victim_cost(job: Job, now: datetime, cfg: CostConfig, wait_hours: float = 0.0) -> VictimCost:
    """Cost of requeueing ``job`` at ``now``; ``wait_hours``: its estimated wait after
    the requeue (:func:`restart_wait_hours`). The job must have a start time."""
    assert job.start_time is not None, "jobs without start time are protected"
    since, source = job.start_time, "start"
    ckpt = last_checkpoint(job)
    if ckpt is not None and ckpt > since:
        # A checkpoint "in the future" (clock skew) saves at most everything.
        since, source = min(ckpt, now), "checkpoint"
    hours = max(0.0, (now - since).total_seconds() / 3600)
    lost = job.gpu_count * hours
    weight = cfg.qos_weights.get(job.qos, 1.0) * cfg.partition_weights.get(job.partition, 1.0)
    return VictimCost(
        lost_gpu_hours=lost,
        weight=weight,
        cost=lost * weight
        + cfg.restart_cost_gpu_hours
        + cfg.requeue_wait_weight * weight * job.gpu_count * wait_hours,
        since=since,
        since_source="checkpoint" if source == "checkpoint" else "start",
        wait_hours=wait_hours,
    )


def restart_wait_hours(
    job: Job, snapshot: ClusterSnapshot, now: datetime, cap_hours: float = 24.0
) -> float:
    """How long ``job`` would wait to run again if requeued now, from the snapshot alone.

    For each other node of its GPU model (its GPUs per node, CPUs and memory fitting
    the node) the time until enough of its GPUs are free: 0 if they are free now, else
    the ends of the jobs holding them by their *time limits* (start + limit: what Slurm
    knows; users over-estimate, so this is an upper bound as backfill's is); GPUs of
    unknown owners or limits never free. The least over nodes, capped at ``cap_hours``.
    Not counted: NVLink shape, and pending jobs that may take a spot first (both make
    the true wait longer; this estimate prices the harm from below).
    """
    if not job.gpus:
        return 0.0
    own = set(job.gpus)
    need = max(len(g) for g in job.gpus.values())
    models = {snapshot.node_by_name[n].gpu_model for n in own if n in snapshot.node_by_name}
    cpus, mem = job.cpus_per_node or 0, job.memory_mb_per_node or 0
    best = cap_hours * 3600
    for node in snapshot.nodes:
        if node.name in own or node.gpu_count < need or node.gpu_model not in models:
            continue
        if (node.cpus or 0) < cpus or (node.memory_mb or 0) < mem:
            continue
        ends: list[float] = []
        for owner in snapshot.gpu_owners[node.name]:
            if owner is None:
                ends.append(0.0)
                continue
            other = snapshot.job_by_id.get(owner) if owner != UNKNOWN_OWNER else None
            if other is None or other.start_time is None or other.time_limit_s is None:
                continue
            end = other.start_time + timedelta(seconds=other.time_limit_s)
            ends.append(max(0.0, (end - now).total_seconds()))
        if len(ends) >= need:
            best = min(best, sorted(ends)[need - 1])
            if best == 0:
                break
    return best / 3600


def wait_saved_hours(job: Job, now: datetime, cap_hours: float) -> float:
    """Hours pending ``job`` would wait without a plan: until slurmctld's planned start
    (never negative: a plan in the past means "any moment now"); ``cap_hours`` when
    Slurm has no plan for it (beyond backfill's depth, or a release that says nothing)."""
    if job.planned_start is None:
        return cap_hours
    return min(cap_hours, max(0.0, (job.planned_start - now).total_seconds() / 3600))


def to_milli(gpu_hours: float) -> int:
    """GPU-hours as the solver's integer milli-GPU-hours."""
    return round(gpu_hours * MILLI)
