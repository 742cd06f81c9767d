"""The simulator's state as a :class:`~slurm_defrag.domain.cluster.ClusterSnapshot`.

This is what the planner reads in the service, so the simulator hands it the same thing.
Limits of the translation, because the snapshot model has whole GPUs only:

* a GPU shared by fractional jobs is reported busy by an unknown owner (``gpus_used``):
  the planner sees it as immovable, and fractional jobs are never victims or targets;
* CPU and memory are not in the snapshot; placements that break them are refused by the
  simulator when it applies the plan.

Job ids are the simulator's job indices as strings; node names are the trace's.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from slurm_defrag.domain.cluster import (
    ClusterSnapshot,
    GpuRequest,
    Job,
    JobState,
    Node,
    NodeFlag,
    Partition,
)
from slurm_defrag.sim.defrag import DefragView
from slurm_defrag.sim.model import MILLI

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
"""Simulated time 0."""
PARTITION = "batch"


def at(seconds: float) -> datetime:
    return EPOCH + timedelta(seconds=seconds)


def to_snapshot(view: DefragView, max_targets: int = 10) -> ClusterSnapshot:
    """The view as a snapshot; the first ``max_targets`` whole-GPU pending jobs are included."""
    state = view.state
    whole_on: dict[int, set[int]] = {}
    jobs: list[Job] = []
    for jid, r in view.running.items():
        if r.job.num_gpu and r.job.gpu_milli == MILLI:
            whole_on.setdefault(r.where.node, set()).update(r.where.gpus)
            jobs.append(
                Job(
                    id=str(jid),
                    name=r.job.name,
                    partition=PARTITION,
                    state=JobState.RUNNING,
                    priority=r.job.priority,
                    submit_time=at(r.job.submit),
                    start_time=at(r.start),
                    time_limit_s=int(r.job.duration) + 1,
                    gpus={state.nodes[r.where.node].name: frozenset(r.where.gpus)},
                )
            )
    nodes: list[Node] = []
    for n, spec in enumerate(state.nodes):
        held = whole_on.get(n, set())
        shared = frozenset(
            g for g in range(spec.gpus) if state.gpu_left[n, g] < MILLI and g not in held
        )
        busy = (
            state.gpu_left[n].sum() < state.gpu_cap[n].sum() or state.cpu_left[n] < state.cpu_cap[n]
        )
        nodes.append(
            Node(
                name=spec.name,
                partitions=(PARTITION,),
                state=frozenset({NodeFlag.MIXED if busy else NodeFlag.IDLE}),
                gpu_model=spec.model if spec.gpus else None,
                gpu_count=spec.gpus,
                topology=spec.topology,
                gpus_used=shared,
            )
        )
    whole = [(jid, j) for jid, j in view.pending if j.num_gpu and j.gpu_milli == MILLI]
    for jid, j in whole[:max_targets]:
        jobs.append(
            Job(
                id=str(jid),
                name=j.name,
                partition=PARTITION,
                state=JobState.PENDING,
                reason="Resources",
                priority=j.priority,
                submit_time=at(j.submit),
                time_limit_s=int(j.duration) + 1,
                request=GpuRequest(gpus_per_node=j.num_gpu, nvlink=j.nvlink),
            )
        )
    return ClusterSnapshot(
        cluster="simulator",
        taken_at=at(view.now),
        source="simulator",
        nodes=tuple(nodes),
        jobs=tuple(jobs),
        partitions=(
            Partition(name=PARTITION, nodes=tuple(n.name for n in nodes), preempt_mode="REQUEUE"),
        ),
    )
