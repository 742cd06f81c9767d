"""The demo's cluster: the course's example cluster, grown, and a stream of jobs.

The start state is the course scenario (:func:`slurm_defrag.synth.course_scenario`, the
cluster of ``examples/course.json``: four 8-GPU A100 nodes where a 3-GPU NVLink job
waits while 9 GPUs are free, none of them usable by it) with four more nodes that
fragmentation has caught the same way: two 8-GPU H100 NVSwitch nodes with 3 free GPUs
each, where a 4-GPU job waits, and two 4-GPU nodes of NVLink pairs. So the first cycle
of either profile has a large job to start and the cheap requeues to start it with:
the point of the demo is a plan applied within its first seconds.

Then jobs keep coming, seeded (:data:`SHAPES`: one to eight GPUs, the larger ones on one
NVLink block), for a load of about :data:`LOAD` of the GPUs: small jobs fill the holes
the finished ones leave, and large ones are blocked by the holes. Run times are hidden
from the service (it sees time limits, which users overestimate); some jobs checkpoint
every 30 minutes, so a requeue costs them only the work since the last one.

Same seed, same cluster and same jobs: ``build`` is called again for the run without
the service that the summary compares with.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import datetime

from slurm_defrag.domain.cluster import JobState
from slurm_defrag.sim.live import LiveCluster
from slurm_defrag.sim.model import JobSpec, NodeSpec
from slurm_defrag.synth import course_scenario

CLUSTER = "demo"
ACCOUNT = "research"
LARGE_GPUS = 4
"""Jobs of this many GPUs or more are the large ones of the summary (the large-jobs
profile's targets)."""
LOAD = 0.9
"""Offered GPU load of the arrivals: GPU-hours submitted per hour, over the GPUs."""
CHECKPOINT_S = 1800.0
CHECKPOINT_SHARE = 0.4


@dataclass(frozen=True)
class Shape:
    gpus: int
    share: float
    hours: tuple[float, float]
    """Run time, drawn log-uniformly between these."""


SHAPES = (
    Shape(1, 0.45, (0.25, 3.0)),
    Shape(2, 0.25, (0.25, 3.0)),
    Shape(4, 0.18, (1.0, 4.0)),
    Shape(8, 0.12, (1.0, 4.0)),
)
USERS = (
    "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi",
    "ivan", "judy", "kim", "leo", "mia", "noah", "olga", "paul",
)  # fmt: skip

# node, GPU model, GPUs, topology: the course's four, then the ones it grew by
GROWN = (
    ("node05", "h100", 8, "nvswitch-8"),
    ("node06", "h100", 8, "nvswitch-8"),
    ("node07", "a100", 4, "nvlink-pairs-4"),
    ("node08", "a100", 4, "nvlink-pairs-4"),
)
# The new nodes' jobs at the start: id, user, node, GPUs, hours running, limit in hours.
# Two GPUs stay free on each node: no 3-GPU NVLink block anywhere (job 110 of the course
# stays blocked), and 8 free H100s, but never 4 on one node (job 122).
GROWN_JOBS: tuple[tuple[str, str, str, tuple[int, ...], float, float], ...] = (
    ("111", "kim", "node05", (0,), 1.5, 8),
    ("112", "leo", "node05", (1, 2), 2.0, 8),
    ("113", "mia", "node05", (4,), 0.4, 4),
    ("114", "noah", "node05", (6,), 3.0, 12),
    ("115", "paul", "node05", (7,), 0.6, 4),
    ("116", "olga", "node06", (0, 1, 2, 3), 1.0, 6),
    ("117", "paul", "node06", (5,), 0.5, 4),
    ("118", "kim", "node06", (6,), 2.0, 6),
    ("119", "leo", "node07", (1,), 0.8, 4),
    ("120", "noah", "node07", (2,), 2.5, 6),
    ("121", "mia", "node08", (0, 1), 1.2, 6),
)
WAITING = ("122", "tara", 4, "h100", 0.3, 6)
"""A 4-GPU H100 job, waiting 0.3 h at the start: id, user, GPUs, model, hours, limit."""
FIRST_ID = 123


def build(seed: int, horizon_s: float, epoch: datetime) -> LiveCluster:
    """The start state at simulated time 0 and every job submitted before ``horizon_s``."""
    rng = random.Random(seed)
    course = course_scenario()
    t0 = course.taken_at
    nodes = [
        NodeSpec(
            name=n.name,
            cpu_milli=128_000,
            memory_mib=1 << 20,
            gpus=n.gpu_count,
            model=n.gpu_model or "none",
            topology=n.topology,
        )
        for n in course.nodes
    ] + [
        NodeSpec(name=name, cpu_milli=128_000, memory_mib=1 << 20, gpus=g, model=m, topology=topo)
        for name, m, g, topo in GROWN
    ]
    cluster = LiveCluster(nodes, epoch, cluster=CLUSTER)

    def ago(hours: float) -> float:
        return -hours * 3600.0

    # The course's jobs as they are in examples/course.json; how much longer each runs is
    # drawn (the snapshot only knows time limits).
    for job in course.jobs:
        if job.state == JobState.RUNNING:
            ((node, held),) = job.gpus.items()
            gpus = tuple(sorted(held))
            assert job.start_time is not None
            assert job.submit_time is not None
            started = (job.start_time - t0).total_seconds()
            spec = JobSpec(
                name=job.name,
                cpu_milli=0,
                memory_mib=0,
                num_gpu=len(gpus),
                gpu_milli=1000,
                submit=(job.submit_time - t0).total_seconds(),
                duration=-started + _hours(rng, (0.3, 4.0)) * 3600,
                time_limit=job.time_limit_s,
                priority=job.priority,
                nvlink=len(gpus) > 1,
                user=job.user,
                account=job.account,
            )
            cluster.submit(job.id, spec)
            cluster.running_since(job.id, node, gpus, started)
        elif job.state == JobState.PENDING and job.request is not None:
            assert job.submit_time is not None
            assert job.request.gpus_per_node is not None
            cluster.submit(
                job.id,
                JobSpec(
                    name=job.name,
                    cpu_milli=0,
                    memory_mib=0,
                    num_gpu=job.request.gpus_per_node,
                    gpu_milli=1000,
                    submit=(job.submit_time - t0).total_seconds(),
                    duration=2.0 * 3600,
                    time_limit=job.time_limit_s,
                    priority=job.priority,
                    nvlink=job.request.nvlink,
                    user=job.user,
                    account=job.account,
                ),
            )
    for jid, user, node, gpus, hours, limit in GROWN_JOBS:
        spec = _spec(f"run-{jid}", user, len(gpus), ago(hours), limit, rng, running_h=hours)
        cluster.submit(jid, spec)
        cluster.running_since(jid, node, gpus, ago(hours))
    jid, user, n, model, hours, limit = WAITING
    spec = _spec(f"train-{n}gpu", user, n, ago(hours), limit, rng, model=model)
    cluster.submit(jid, spec)
    for i, spec in enumerate(arrivals(rng, horizon_s, sum(s.gpus for s in nodes))):
        cluster.submit(str(FIRST_ID + i), spec)
    return cluster


def arrivals(rng: random.Random, horizon_s: float, gpus: int) -> list[JobSpec]:
    """Jobs submitted in (0, horizon_s): Poisson, for an offered load of LOAD x gpus."""
    mean_gpu_h = sum(
        s.share * s.gpus * (s.hours[1] - s.hours[0]) / math.log(s.hours[1] / s.hours[0])
        for s in SHAPES
    )
    rate = LOAD * gpus / mean_gpu_h / 3600.0  # jobs per second
    out: list[JobSpec] = []
    t = rng.expovariate(rate)
    while t < horizon_s:
        shape = rng.choices(SHAPES, [s.share for s in SHAPES])[0]
        name = f"{'train' if shape.gpus >= LARGE_GPUS else 'job'}-{shape.gpus}gpu"
        user = rng.choice(USERS)
        model = rng.choice(("h100", "a100")) if rng.random() < 0.2 else None
        limit_h = 0.0
        spec = _spec(name, user, shape.gpus, t, limit_h, rng, model=model, hours=shape.hours)
        out.append(spec)
        t += rng.expovariate(rate)
    return out


def _hours(rng: random.Random, bounds: tuple[float, float]) -> float:
    lo, hi = bounds
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def _spec(
    name: str,
    user: str,
    gpus: int,
    submit: float,
    limit_h: float,
    rng: random.Random,
    *,
    model: str | None = None,
    hours: tuple[float, float] = (0.5, 3.0),
    running_h: float = 0.0,
) -> JobSpec:
    """A job of ``gpus`` GPUs (one NVLink block from 2 up); ``limit_h`` 0: the user asks
    1.5 to 3 times its run time, rounded up to the half hour."""
    run = running_h * 3600 + _hours(rng, hours) * 3600
    if not limit_h:
        limit_h = math.ceil(run / 3600 * rng.uniform(1.5, 3.0) * 2) / 2
    return JobSpec(
        name=name,
        cpu_milli=0,
        memory_mib=0,
        num_gpu=gpus,
        gpu_milli=1000,
        gpu_models=frozenset({model}) if model else None,
        submit=submit,
        duration=min(run, limit_h * 3600),
        time_limit=limit_h * 3600,
        priority=1000,
        nvlink=gpus > 1,
        ckpt_interval=CHECKPOINT_S if rng.random() < CHECKPOINT_SHARE else None,
        user=user,
        account=ACCOUNT,
    )
