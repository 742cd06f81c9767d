"""Synthetic clusters: the course scenario and seeded random fragmented clusters.

Used by ``examples/`` (written once, committed), the benchmarks and the tests. Random
clusters place jobs like a scheduler without packing would: the GPUs a job gets on a node
are chosen at random among the free ones, which is what leaves NVLink blocks broken.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from slurm_defrag.domain.cluster import (
    GPU_MEMORY_GB,
    ClusterSnapshot,
    GpuRequest,
    Job,
    JobState,
    Node,
    Partition,
)
from slurm_defrag.domain.topology import BUILTIN_TOPOLOGIES

EPOCH = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def course_scenario() -> ClusterSnapshot:
    """The course's scenario: 4 x 8 A100, node03 is A100 80GB, a 3-GPU NVLink job waits.

    Job A holds 4 GPUs of node01 for 3 h, job C one GPU of node02, job B (2 GPUs split over
    node01 and node03) has just finished. Other tenants' jobs fill the rest so that no node
    keeps 3 free NVLink-connected GPUs: 9 GPUs (440 GB) are free, none usable by the job.
    node04 is a PCIe A100 server with NVLink bridges in pairs: it can never host 3 connected.
    """
    t = EPOCH

    def a100_node(name: str, model: str, memory_gb: float, topology: str) -> Node:
        return Node(name=name, partitions=("batch",), state=frozenset({"MIXED"}),
                    gpu_model=model, gpu_count=8, gpu_memory_gb=memory_gb,
                    topology=topology)  # fmt: skip

    nodes = [
        a100_node("node01", "a100", 40, "nvswitch-8"),
        a100_node("node02", "a100", 40, "nvswitch-8"),
        a100_node("node03", "a100-80g", 80, "nvswitch-8"),
        a100_node("node04", "a100", 40, "nvlink-pairs-8"),
    ]

    def running(jid: str, name: str, user: str, node: str, gpus: list[int], hours: float) -> Job:
        return Job(
            id=jid,
            name=name,
            user=user,
            account="research",
            partition="batch",
            qos="normal",
            priority=1000,
            state=JobState.RUNNING,
            submit_time=t - timedelta(hours=hours + 0.1),
            start_time=t - timedelta(hours=hours),
            time_limit_s=24 * 3600,
            gpus={node: frozenset(gpus)},
        )

    jobs = [
        running("101", "jobA", "alice", "node01", [0, 1, 2, 3], 3.0),
        Job(
            id="102",
            name="jobB",
            user="bob",
            account="research",
            partition="batch",
            state=JobState.COMPLETED,
            submit_time=t - timedelta(hours=2),
            start_time=t - timedelta(hours=1.9),
            time_limit_s=4 * 3600,
            gpus={"node01": frozenset({6}), "node03": frozenset({0})},
        ),
        running("103", "jobC", "carol", "node02", [0], 1.0),
        running("104", "prep", "erin", "node01", [4, 5], 0.3),
        running("105", "sweep", "frank", "node02", [2, 3, 4, 5, 6, 7], 5.0),
        running("106", "finetune", "grace", "node03", [1, 2, 3, 4, 5, 6], 2.0),
        running("107", "notebook", "heidi", "node04", [0], 0.5),
        running("108", "notebook", "ivan", "node04", [3], 0.7),
        running("109", "eval", "judy", "node04", [4, 5], 1.2),
        Job(
            id="110",
            name="train-3gpu",
            user="dave",
            account="research",
            partition="batch",
            qos="normal",
            priority=1500,
            state=JobState.PENDING,
            reason="Resources",
            submit_time=t - timedelta(minutes=45),
            time_limit_s=12 * 3600,
            request=GpuRequest(gpus_per_node=3, nvlink=True),
        ),
    ]
    return ClusterSnapshot(
        cluster="course",
        taken_at=t,
        source="file",
        nodes=tuple(nodes),
        jobs=tuple(jobs),
        partitions=(
            Partition(name="batch", nodes=tuple(n.name for n in nodes), preempt_mode="REQUEUE"),
        ),
    )


@dataclass(frozen=True)
class NodeKind:
    topology: str
    gpu_model: str
    share: float


MIXED_KINDS = (
    NodeKind("nvswitch-8", "h100", 0.35),
    NodeKind("nvswitch-8", "a100", 0.25),
    NodeKind("nvlink-pairs-8", "a100-80g", 0.15),
    NodeKind("dgx1-hybrid-cube-mesh", "v100", 0.15),
    NodeKind("pcie-2x4", "a100", 0.10),
)

JOB_SIZES = ((1, 0.45), (2, 0.25), (4, 0.18), (8, 0.12))


def random_cluster(
    n_nodes: int,
    seed: int = 0,
    fill: float = 0.7,
    pending: int = 20,
    kinds: tuple[NodeKind, ...] = MIXED_KINDS,
    partitions: tuple[str, ...] = ("batch", "high"),
) -> ClusterSnapshot:
    """A moderately fragmented cluster: ``fill`` of GPUs busy, placed at random."""
    rng = random.Random(seed)
    t = EPOCH
    # One random stream, drawn in this order: nodes, running jobs, pending jobs.
    nodes, free = _random_nodes(rng, n_nodes, kinds, partitions)
    jobs = _running_jobs(rng, n_nodes, fill, partitions, t, nodes, free)
    jobs += _pending_jobs(rng, pending, kinds, partitions, t, 1000 + len(jobs))
    part_objs = tuple(
        Partition(
            name=p,
            nodes=tuple(n.name for n in nodes if p in n.partitions),
            priority_tier=10 if p == "high" else 1,
        )
        for p in partitions
    )
    return ClusterSnapshot(
        cluster=f"synthetic-{n_nodes}",
        taken_at=t,
        source="simulator",
        nodes=tuple(nodes),
        jobs=tuple(jobs),
        partitions=part_objs,
    )


def _random_nodes(
    rng: random.Random, n_nodes: int, kinds: tuple[NodeKind, ...], partitions: tuple[str, ...]
) -> tuple[list[Node], dict[str, list[int]]]:
    """The nodes (a few drained or down), and each one's free GPUs."""
    width = max(3, len(str(n_nodes)))
    nodes: list[Node] = []
    free: dict[str, list[int]] = {}
    weights = [k.share for k in kinds]
    for i in range(n_nodes):
        kind = rng.choices(kinds, weights)[0]
        topo = BUILTIN_TOPOLOGIES[kind.topology]
        name = f"gpu{i + 1:0{width}d}"
        state = "IDLE"
        roll = rng.random()
        if roll < 0.01:
            state = "IDLE+DRAIN"
        elif roll < 0.015:
            state = "DOWN"
        part = (partitions[0],) if i % 4 else partitions
        nodes.append(
            Node(
                name=name,
                partitions=part,
                state=frozenset(state.split("+")),
                gpu_model=kind.gpu_model,
                gpu_count=topo.gpu_count,
                gpu_memory_gb=GPU_MEMORY_GB[kind.gpu_model],
                topology=kind.topology,
            )
        )
        free[name] = list(range(topo.gpu_count)) if "IDLE" in state else []
    return nodes, free


def _running_jobs(
    rng: random.Random,
    n_nodes: int,
    fill: float,
    partitions: tuple[str, ...],
    t: datetime,
    nodes: list[Node],
    free: dict[str, list[int]],
) -> list[Job]:
    """Running one-node jobs at random places until ``fill`` of the free GPUs are busy."""
    jobs: list[Job] = []
    target = int(fill * sum(len(v) for v in free.values()))
    used = 0
    names = [n.name for n in nodes]
    next_id = 1000
    sizes = [k for k, _ in JOB_SIZES]
    size_w = [w for _, w in JOB_SIZES]
    attempts = 0
    while used < target and attempts < 20 * n_nodes:
        attempts += 1
        k = rng.choices(sizes, size_w)[0]
        node = rng.choice(names)
        if len(free[node]) < k:
            continue
        gpus = rng.sample(free[node], k)
        for g in gpus:
            free[node].remove(g)
        used += k
        hours = rng.uniform(0.05, 30)
        jobs.append(
            Job(
                id=str(next_id),
                name=f"job{next_id}",
                user=f"user{rng.randrange(40)}",
                account=f"acct{rng.randrange(8)}",
                partition=partitions[0],
                qos="normal",
                priority=rng.randrange(100, 10000),
                state=JobState.RUNNING,
                submit_time=t - timedelta(hours=hours + 0.5),
                start_time=t - timedelta(hours=hours),
                time_limit_s=int((hours + rng.uniform(0.5, 24)) * 3600),
                requeue=rng.random() > 0.1,
                gpus={node: frozenset(gpus)},
            )
        )
        next_id += 1
    return jobs


def _pending_jobs(
    rng: random.Random,
    pending: int,
    kinds: tuple[NodeKind, ...],
    partitions: tuple[str, ...],
    t: datetime,
    next_id: int,
) -> list[Job]:
    """Pending GPU jobs waiting on resources, ids from ``next_id``."""
    jobs: list[Job] = []
    models = sorted({k.gpu_model for k in kinds})
    for _ in range(pending):
        k = rng.choice((2, 4, 4, 8, 8))
        nodes_req = 2 if k == 8 and rng.random() < 0.2 else 1
        jobs.append(
            Job(
                id=str(next_id),
                name=f"pend{next_id}",
                user=f"user{rng.randrange(40)}",
                account=f"acct{rng.randrange(8)}",
                partition=partitions[0],
                qos="normal",
                priority=rng.randrange(100, 10000),
                state=JobState.PENDING,
                reason=rng.choice(("Resources", "Priority")),
                submit_time=t - timedelta(minutes=rng.uniform(1, 600)),
                time_limit_s=int(rng.uniform(1, 48) * 3600),
                request=GpuRequest(
                    nodes=nodes_req,
                    gpus_per_node=k,
                    gpu_model=rng.choice([None, None, *models]),
                    nvlink=k > 1 and rng.random() < 0.8,
                ),
            )
        )
        next_id += 1
    return jobs
