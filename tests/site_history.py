"""A small stored history for ``simulate --workload db:URL`` (import as ``from site_history
import ...``): five snapshots ten minutes apart of one 8-GPU node, written by the service's
own snapshot writer, with a job of every kind the replay tells apart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from slurm_defrag.domain.cluster import ClusterSnapshot, GpuRequest, Job, JobState, Node
from slurm_defrag.metrics.compute import compute
from slurm_defrag.store import migrate
from slurm_defrag.store.database import Store
from slurm_defrag.store.engine import make_engine
from slurm_defrag.store.repo import Repository

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
NODE = Node(name="g1", state="MIXED", gpu_model="h100", gpu_count=8, gpu_memory_gb=80.0,
            topology="nvswitch-8", partitions=("batch",), cpus=64, memory_mb=512_000)  # fmt: skip


def at(minute: float) -> float:
    return (T0 + timedelta(minutes=minute)).timestamp()


PAIRS = {"1": (0, 1), "2": (2, 3), "5": (0, 1), "6": (4, 5), "7": (2, 3), "9": (6, 7)}


def job(job_id: str, state: JobState, start: float | None = None, **kw: object) -> Job:
    """Job ``job_id``, submitted at T0 asking 2 h100 GPUs (4 CPUs, 16 GB a node); running
    (on two GPUs of g1, :data:`PAIRS`) since ``start`` minutes when it holds GPUs."""
    base: dict[str, object] = {
        "id": job_id, "user": "ann", "account": "physics", "partition": "batch", "qos": "high",
        "submit_time": T0, "time_limit_s": 3600, "cpus_per_node": 4, "memory_mb_per_node": 16_000,
        "request": GpuRequest(gpus_per_node=2, gpu_model="h100"),
    }  # fmt: skip
    if state == JobState.PENDING:
        base["reason"] = "Resources"
    else:
        base["gpus"] = {"g1": frozenset(PAIRS[job_id])}
        if start is not None:
            base["start_time"] = T0 + timedelta(minutes=start)
    return Job(state=state, **(base | kw))  # type: ignore[arg-type]


P, R = JobState.PENDING, JobState.RUNNING
HISTORY: list[tuple[int, tuple[Job, ...]]] = [
    (0, (job("1", P), job("2", R, -5, time_limit_s=300, submit_time=T0 - timedelta(minutes=10)),
         job("3", P), job("6", R, 0),
         job("9", P))),
    (10, (job("1", R, 7), job("3", P), job("6", P), job("7", R, None), job("9", R, 9))),
    (20, (job("1", R, 7), job("6", R, 15), job("9", R, 9))),
    (30, (job("5", R, 30), job("9", R, 9))),
    (40, (job("4", P), job("5", R, 30))),
]  # fmt: skip
"""Job 1 waits, starts at 7 and ends between 20 and 30; 2 ran before the first snapshot,
past its 5-minute limit; 3 leaves the queue never seen running; 4 still waits and 5 still
runs at the end; 6 is requeued at 10 and starts again at 15; 7 has no StartTime; 9 starts
at 9, ends between 30 and 40. Job id 8 is in no snapshot."""


def snapshots() -> list[ClusterSnapshot]:
    return [
        ClusterSnapshot(
            cluster="site", taken_at=T0 + timedelta(minutes=m), nodes=(NODE,), jobs=jobs
        )
        for m, jobs in HISTORY
    ]


def write_history(url: str) -> None:
    """``url``'s database migrated to head, holding :data:`HISTORY`."""
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    with Store.open(url) as store:
        repo = Repository(store)
        for snap in snapshots():
            repo.save_snapshot(snap, compute(snap), "dry-run")
