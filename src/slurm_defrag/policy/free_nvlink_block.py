"""FreeNvlinkBlock: pending GPU jobs that fragmentation starves become planner targets.

"Falsely starved" is the metrics' diagnosis (:mod:`slurm_defrag.metrics.starvation`): the
job cannot start, yet the free GPUs it could use add up to its request — they are scattered
over nodes or not NVLink-connected. Those are exactly the jobs a requeue or drain can help.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.domain.job_limits import job_limits
from slurm_defrag.policy.base import Candidate
from slurm_defrag.policy.queue_position import queue_positions

Status = Literal["falsely-starved", "short", "can-start"]
Reason = Literal["topology", "spatial", "configuration"]


def _default_statuses() -> list[Status]:
    return ["falsely-starved"]


def _default_reasons() -> list[Reason]:
    return ["topology", "spatial", "configuration"]


NAME = "free-nvlink-block"


class FreeNvlinkBlockArgs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    statuses: list[Status] = Field(default_factory=_default_statuses, min_length=1)
    """Starvation statuses that make a target. ``short`` jobs wait on real capacity, but
    requeueing lower-value work can still start them when the policy wants that."""
    reasons: list[Reason] = Field(default_factory=_default_reasons)
    """For falsely starved jobs: which causes to act on."""
    partitions: list[str] = Field(default_factory=list)
    """Only jobs of these partitions (empty: all)."""
    min_wait_minutes: Annotated[float, Field(ge=0)] = 0.0
    """Ignore jobs that have waited less (they may start by themselves)."""
    max_targets: Annotated[int, Field(ge=1)] = 50
    queue_head: Annotated[int, Field(ge=1)] | None = None
    """Only jobs with fewer than this many jobs ahead of them in their partition's queue
    (:mod:`~slurm_defrag.policy.queue_position`); none: anywhere in it. A job further back
    waits for its turn, not for fragmentation: freeing a block for it would overtake the
    jobs ahead, against the site's fair-share and QOS order (issue #41; a profile's
    ``[defrag] queue_head`` is the simulator's)."""
    min_gpus_per_node: Annotated[int, Field(ge=1)] = 1
    """Only jobs asking at least this many GPUs per node (4: the large jobs only, with the
    ``large-job`` protection the setting the simulator's ``planner-gain`` measures)."""


class FreeNvlinkBlock:
    name = NAME

    def __init__(self, args: FreeNvlinkBlockArgs | None = None) -> None:
        self.args = args or FreeNvlinkBlockArgs()

    def propose(self, snapshot: ClusterSnapshot) -> list[Candidate]:
        from slurm_defrag.metrics.classes import group_nodes
        from slurm_defrag.metrics.demand import DemandItem
        from slurm_defrag.metrics.starvation import NodeScan, diagnose_job

        a = self.args
        kinds = group_nodes(snapshot)
        # One node scan per job shape (metrics' memo for one snapshot): 50 pending jobs of
        # 12 shapes on 1,000 nodes, 0.12 s -> a fraction, paid every service cycle.
        scans: dict[DemandItem, NodeScan] = {}
        picked: list[tuple[tuple[int, float, str], Candidate]] = []
        ahead = queue_positions(snapshot) if a.queue_head is not None else {}
        # (A job whose Slurm record did not read whole asks for nothing, so it is never
        # among these: no target is planned on a guess, issue #40.)
        for job in snapshot.pending_gpu_jobs():
            if a.partitions and job.partition not in a.partitions:
                continue
            shape = job.request.per_node_shape() if job.request is not None else None
            if a.min_gpus_per_node > 1 and (shape is None or shape[1] < a.min_gpus_per_node):
                continue
            if a.queue_head is not None and ahead.get(job.id, a.queue_head) >= a.queue_head:
                continue
            if job_limits(job, shape[0] if shape is not None else 1).unreadable:
                # the planner would refuse it (docs/planner.md, "A job's own limits"): it
                # must not take a target slot from another user's job
                continue
            waited = _waited_minutes(job.submit_time, snapshot.taken_at)
            if waited < a.min_wait_minutes:
                continue
            st = diagnose_job(snapshot, job, kinds, scans)
            if st.status not in a.statuses:
                continue
            if st.status == "falsely-starved" and st.reason not in a.reasons:
                continue
            why = st.status + (f" ({st.reason})" if st.reason else "") + f": {st.message}"
            # Highest priority first, then longest waiting: the order limits cut by.
            picked.append(((-job.priority, -waited, job.id), Candidate(job.id, NAME, why)))
        picked.sort(key=lambda p: p[0])
        return [c for _, c in picked[: a.max_targets]]


def _waited_minutes(submit: datetime | None, now: datetime) -> float:
    return (now - submit).total_seconds() / 60 if submit is not None else 0.0
