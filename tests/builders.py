"""Builders for small hand-made snapshots, so a test states only what matters to it.

Imported by tests as ``from builders import ...`` (``tests/`` is on ``sys.path`` because
``tests/conftest.py`` lives there).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from slurm_defrag.domain.cluster import ClusterSnapshot, GpuRequest, Job, JobState, Node
from slurm_defrag.domain.topology import BUILTIN_TOPOLOGIES
from slurm_defrag.metrics.demand import DemandItem, MixSource, WorkloadMix
from slurm_defrag.synth import EPOCH, course_scenario

MEMORY_GB = {"a100": 40.0, "a100-80g": 80.0, "h100": 80.0, "v100": 32.0}


def node(
    name: str,
    topology: str | None = "nvswitch-8",
    *,
    model: str = "a100",
    state: str = "MIXED",
    partitions: tuple[str, ...] = ("batch",),
    gpu_count: int | None = None,
    reservation: str | None = None,
    gpus_used: Iterable[int] = (),
) -> Node:
    """A GPU node; ``gpu_count`` defaults to the topology's."""
    if gpu_count is None:
        assert topology is not None
        gpu_count = BUILTIN_TOPOLOGIES[topology].gpu_count
    return Node(
        name=name,
        partitions=partitions,
        state=state,
        gpu_model=model,
        gpu_count=gpu_count,
        gpu_memory_gb=MEMORY_GB[model],
        topology=topology,
        reservation=reservation,
        gpus_used=frozenset(gpus_used),
    )


def running(job_id: str, gpus: dict[str, Iterable[int]], partition: str = "batch") -> Job:
    return Job(
        id=job_id,
        state=JobState.RUNNING,
        partition=partition,
        gpus={n: frozenset(g) for n, g in gpus.items()},
    )


def pending(
    job_id: str,
    gpus_per_node: int | None = None,
    *,
    nodes: int = 1,
    total_gpus: int | None = None,
    nvlink: bool = False,
    model: str | None = None,
    whole_node: bool = False,
    partition: str = "batch",
    reason: str = "Resources",
) -> Job:
    return Job(
        id=job_id,
        state=JobState.PENDING,
        partition=partition,
        reason=reason,
        request=GpuRequest(
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            total_gpus=total_gpus,
            gpu_model=model,
            nvlink=nvlink,
            whole_node=whole_node,
        ),
    )


def busy(node_name: str, gpus: Iterable[int], job_id: str | None = None) -> Job:
    """A running job holding ``gpus`` of one node (its id defaults to ``<node>-busy``)."""
    return running(job_id or f"{node_name}-busy", {node_name: gpus})


def snapshot(nodes: Iterable[Node], jobs: Iterable[Job] = ()) -> ClusterSnapshot:
    return ClusterSnapshot(cluster="test", taken_at=EPOCH, nodes=tuple(nodes), jobs=tuple(jobs))


def mix(*items: DemandItem) -> WorkloadMix:
    return WorkloadMix(source=MixSource.DECLARED, items=items)


def item(k: int, **kw: Any) -> DemandItem:
    """One mix item of ``k`` GPUs per node (``nvlink=True`` etc. as keywords)."""
    return DemandItem(gpus_per_node=k, **kw)


def unreadable(snap: ClusterSnapshot, job_id: str, reason: str) -> ClusterSnapshot:
    """``snap`` with one job as a reader leaves a record it could not read whole (issue
    #40): ``unreadable`` set (``"<part>: <reason>"``), no request, the rest kept."""
    jobs = [
        Job.model_validate({**j.model_dump(), "unreadable": reason, "request": None})
        if j.id == job_id
        else j
        for j in snap.jobs
    ]
    return ClusterSnapshot.model_validate({**snap.model_dump(), "jobs": jobs})


def one_gpu_jobs(node_name: str, index: int, gpus: Iterable[int], at: datetime) -> list[Job]:
    """A 1-GPU job of its own user on each of ``gpus`` of ``node_name`` (the ``index``-th
    node), started half an hour before ``at``: a node packed with small jobs."""
    return [
        Job(
            id=str(1000 + 8 * index + g),
            user=f"s{index:02d}{g}",
            partition="batch",
            state=JobState.RUNNING,
            start_time=at - timedelta(minutes=30),
            time_limit_s=48 * 3600,
            gpus={node_name: frozenset({g})},
        )
        for g in gpus
    ]


def course_small_victims() -> ClusterSnapshot:
    """The course scenario (``synth.course_scenario``) with the jobs the planner may requeue
    for 110 instead of 104 holding fewer GPUs than its 3-GPU share, at the costs they had.
    A job holding 3 or more GPUs of a node is never requeued for 3 GPUs there (the swap
    rule), so in the course itself 104 is 110's only way; here, as the course's tests
    describe it, 101 (node01) and 106 (node03) tie at 12 GPU-h and 105 (node02) costs 30:

    * node01: 101 holds GPUs 0-1 for 6 h (was 0-3 for 3 h); 111 holds 2-3 for 8 h;
    * node02: 105 holds 2-3 for 15 h (was 2-7 for 5 h); 112 and 114 hold 4-5 and 6-7
      for 20 h;
    * node03: 106 holds 1-2 for 6 h (was 1-6 for 2 h); 113 and 115 hold 3-4 and 5-6
      for 8 h.

    111-115 (oscar's, 2 GPUs each) cost more than the job they sit beside on every node.
    """
    course = course_scenario()
    moved = {"101": ("node01", (0, 1), 6.0), "105": ("node02", (2, 3), 15.0)}
    moved["106"] = ("node03", (1, 2), 6.0)
    moved |= {
        "111": ("node01", (2, 3), 8.0),
        "112": ("node02", (4, 5), 20.0),
        "113": ("node03", (3, 4), 8.0),
        "114": ("node02", (6, 7), 20.0),
        "115": ("node03", (5, 6), 8.0),
    }
    template = course.job_by_id["101"].model_copy(update={"name": "service", "user": "oscar"})
    jobs = list(course.jobs)
    jobs += [template.model_copy(update={"id": jid}) for jid in ("111", "112", "113", "114", "115")]
    out = []
    for j in jobs:
        if j.id in moved:
            name, gpus, hours = moved[j.id]
            j = j.model_copy(
                update={
                    "gpus": {name: frozenset(gpus)},
                    "start_time": EPOCH - timedelta(hours=hours),
                    "submit_time": EPOCH - timedelta(hours=hours + 0.1),
                }
            )
        out.append(j)
    return ClusterSnapshot.model_validate(
        {**course.model_dump(), "jobs": [j.model_dump() for j in out]}
    )
