"""The simulator's state as a :class:`~slurm_defrag.domain.cluster.ClusterSnapshot`.

This is what the planner reads in the service, so the simulator hands it the same thing.
Limits of the translation, because the snapshot model has whole GPUs only:

* a GPU shared by fractional jobs is reported busy by an unknown owner (``gpus_used``):
  the planner sees it as immovable, and fractional jobs are never victims or targets;
* CPU and memory are in whole CPUs and MiB: a node's free CPUs are rounded down, a
  target's CPUs up and a victim's down, so a plan never counts on CPUs that are not
  there; CPU-only and fractional jobs hold their CPUs immovably (``cpus_alloc``).

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


def _one_model(models: frozenset[str] | None) -> str | None:
    """A snapshot request names one GPU type; a job accepting several is shown as "any" (the
    simulator refuses a planned placement on a type the job does not accept)."""
    return next(iter(models)) if models is not None and len(models) == 1 else None


def to_snapshot(
    view: DefragView, max_targets: int = 10, min_gpus: int = 1, keep_gpus: int | None = None
) -> ClusterSnapshot:
    """The view as a snapshot with the first ``max_targets`` pending jobs that take at least
    ``min_gpus`` whole GPUs (queue order). Running jobs with ``keep_gpus`` GPUs or more are
    shown with ``Requeue=0`` (never victims)."""
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
                    cpus_per_node=r.job.cpu_milli // MILLI,
                    memory_mb_per_node=r.job.memory_mib,
                    requeue=keep_gpus is None or r.job.num_gpu < keep_gpus,
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
                cpus=spec.cpu_milli // MILLI,
                cpus_alloc=spec.cpu_milli // MILLI - int(state.cpu_left[n]) // MILLI,
                memory_mb=spec.memory_mib,
                memory_alloc_mb=spec.memory_mib - int(state.mem_left[n]),
            )
        )
    whole = [(jid, j) for jid, j in view.pending
             if j.num_gpu >= max(1, min_gpus) and j.gpu_milli == MILLI]
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
                request=GpuRequest(gpus_per_node=j.num_gpu, nvlink=j.nvlink,
                                   gpu_model=_one_model(j.gpu_models)),
                cpus_per_node=-(-j.cpu_milli // MILLI),
                memory_mb_per_node=j.memory_mib,
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
