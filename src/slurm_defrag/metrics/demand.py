"""The workload mix that "usable" is measured against.

Fragmentation only means something relative to what jobs want: two free GPUs on one node
are perfect for a 2-GPU job and useless for an 8-GPU job. The mix is, in order of
preference: one the user declares (``--mix FILE``), the pending queue, or — when nothing is
pending — a default mix of 1/2/4/8-GPU jobs with NVLink for k >= 2.
"""

from __future__ import annotations

from collections import Counter
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from slurm_defrag.domain.cluster import ClusterSnapshot, GpuRequest

HOLD_REASONS = frozenset(
    {
        "JobHeldAdmin",
        "JobHeldUser",
        "Dependency",
        "DependencyNeverSatisfied",
        "BeginTime",
        "AssocGrpGRES",
        "QOSMaxGRESPerUser",
        "AssocMaxJobsLimit",
        "ReqNodeNotAvail",
        "PartitionDown",
        "PartitionInactive",
        "Reservation",
        "JobArrayTaskLimit",
        "InvalidAccount",
        "InvalidQOS",
        "BadConstraints",
        "launch_failed_requeued_held",
    }
)
"""Pending reasons that fragmentation cannot explain: the job would wait on an empty cluster."""


class MixSource(StrEnum):
    DECLARED = "declared"
    PENDING = "pending"
    DEFAULT = "default"


class DemandItem(BaseModel):
    """One kind of job in the mix: ``nodes`` x ``gpus_per_node`` (per-node shape)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpus_per_node: Annotated[int, Field(ge=1, le=16)]
    nodes: Annotated[int, Field(ge=1)] = 1
    gpu_model: str | None = None
    nvlink: bool = False
    whole_node: bool = False
    partition: str | None = None
    weight: Annotated[float, Field(gt=0)] = 1.0


class WorkloadMix(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    source: MixSource = MixSource.DECLARED
    items: tuple[DemandItem, ...]

    @property
    def total_weight(self) -> float:
        return sum(i.weight for i in self.items)


def item_for_request(req: GpuRequest, partition: str | None) -> DemandItem:
    """Per-node demand of a request. A spreadable ``--gpus=N`` can use any single free GPU."""
    shape = req.per_node_shape()
    nodes, per_node = shape if shape is not None else (1, 1)
    return DemandItem(
        gpus_per_node=per_node,
        nodes=nodes,
        gpu_model=req.gpu_model,
        nvlink=req.nvlink and per_node > 1,
        whole_node=req.whole_node,
        partition=partition or None,
    )


def waits_on_resources(reason: str) -> bool:
    """True if a pending job waits on resources (so fragmentation may be the cause)."""
    return reason.split(",")[0].strip() not in HOLD_REASONS


def mix_from_pending(snapshot: ClusterSnapshot) -> WorkloadMix | None:
    counts: Counter[DemandItem] = Counter()
    for job in snapshot.pending_gpu_jobs():
        if job.request is not None and waits_on_resources(job.reason):
            counts[item_for_request(job.request, job.partition)] += 1
    if not counts:
        return None
    items = tuple(i.model_copy(update={"weight": float(n)}) for i, n in counts.items())
    return WorkloadMix(source=MixSource.PENDING, items=items)


def default_mix() -> WorkloadMix:
    return WorkloadMix(
        source=MixSource.DEFAULT,
        items=tuple(DemandItem(gpus_per_node=k, nvlink=k > 1) for k in (1, 2, 4, 8)),
    )


def resolve_mix(snapshot: ClusterSnapshot, declared: WorkloadMix | None = None) -> WorkloadMix:
    return declared or mix_from_pending(snapshot) or default_mix()
