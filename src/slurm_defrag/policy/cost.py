"""What requeueing a running job costs: the GPU-hours of work it loses, weighted, plus a
fixed restart cost.

Lost work runs from the job's last declared checkpoint (``defrag:ckpt=``, see
:mod:`slurm_defrag.policy.comment_keys`) or, without one, from its start. A job spanning
several nodes is requeued whole: all its GPUs count. The weight is the product of the
policy's QOS weight and partition weight (1.0 when not listed), so an operator can make
"scavenger" work cheap to requeue and production work dear.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from slurm_defrag.domain.cluster import Job
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


@dataclass(frozen=True, slots=True)
class VictimCost:
    lost_gpu_hours: float
    """GPUs held (all nodes) x hours since ``since``; unweighted, what limits count."""
    weight: float
    cost: float
    """``lost_gpu_hours * weight + restart``: what the planner minimises."""
    since: datetime
    since_source: Literal["start", "checkpoint"]


def victim_cost(job: Job, now: datetime, cfg: CostConfig) -> VictimCost:
    """Cost of requeueing ``job`` at ``now``. The job must have a start time."""
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
        cost=lost * weight + cfg.restart_cost_gpu_hours,
        since=since,
        since_source="checkpoint" if source == "checkpoint" else "start",
    )


def to_milli(gpu_hours: float) -> int:
    """GPU-hours as the solver's integer milli-GPU-hours."""
    return round(gpu_hours * MILLI)
