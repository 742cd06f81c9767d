"""A small constructed history with known waits, starvation and requeues (import as
``from impact_history import ...``): the impact report's figures, computed by hand.

Three 8-GPU h100 nodes, one snapshot every 10 minutes for 20 hours; the service ran in
dry-run for the first 10 hours, in enforce after (``snapshots.mode``). ``T0`` is the first
snapshot. Jobs (hours after T0):

=====  ======  ============  ======  =====  ==========================================
job    GPUs    where         submit  start  notes
=====  ======  ============  ======  =====  ==========================================
F1     4       n1 0-3        -1      -1     ends at 5
F2     4       n2 0-3        -1      -1     ends at 5
F3     2       n3 6-7        -1      -1     runs on
A      1       n3 0          0       2      ends at 8
B      8 NVL   n1 0-7        1       5      falsely starved 1..5 (n1, n2: 4 + 4 free)
S      1       n3 1          9       10.5   waits across the change: in neither period
C      1       n3 2          11      11.5
D      8 NVL   n2 0-7        12      13     can start at once (n2 idle): not starved
=====  ======  ============  ======  =====  ==========================================

n1 and n2 are NVSwitch nodes, n3 has PCIe only (it never hosts an 8-GPU NVLink job). The
F jobs started before the first snapshot: no snapshot saw them start, so their waits are in
no period.
Plans: a dry-run plan at 3 (one requeue that did not happen), an enforce plan at 12 (one
requeue done, 3.0 GPU-hours lost), an enforce plan at 14 aborted (its requeue skipped).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import ClassVar

from slurm_defrag.domain.cluster import ClusterSnapshot, GpuRequest, Job, JobState, Node
from slurm_defrag.metrics.compute import compute
from slurm_defrag.store.database import Store
from slurm_defrag.store.plans import NewStep
from slurm_defrag.store.repo import Repository

T0 = datetime(2026, 6, 1, tzinfo=UTC)
STEP = timedelta(minutes=10)
SNAPSHOTS = 121  # 0 .. 20 h
CHANGE = T0 + timedelta(hours=10)
NOW = T0 + timedelta(hours=20)
SINCE_S = 24 * 3600.0
"""The window [NOW - 24 h, NOW] starts 4 h before T0: the F jobs' starts are in it."""


def h(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


@dataclass(frozen=True)
class J:
    id: str
    gpus: int
    node: str
    idx: tuple[int, ...]
    submit: float
    start: float
    end: float | None
    account: str
    user: str
    limit_h: float = 24.0


JOBS = (
    J("1", 4, "n1", (0, 1, 2, 3), -1, -1, 5, "fill", "fred"),
    J("2", 4, "n2", (0, 1, 2, 3), -1, -1, 5, "fill", "fred"),
    J("3", 2, "n3", (6, 7), -1, -1, None, "fill", "fred"),
    J("4", 1, "n3", (0,), 0, 2, 8, "small", "ann"),  # A
    J("5", 8, "n1", tuple(range(8)), 1, 5, 15, "big", "bob"),  # B
    J("6", 1, "n3", (1,), 9, 10.5, None, "small", "ann"),  # S
    J("7", 1, "n3", (2,), 11, 11.5, None, "small", "ann"),  # C
    J("8", 8, "n2", tuple(range(8)), 12, 13, None, "big", "bob"),  # D
)


class Expected:
    """The figures by hand (see the module docstring)."""

    before_waits = (2.0, 4.0)  # A B
    after_waits = (0.5, 1.0)  # C D
    before_large = (4.0,)  # B (4+ GPUs)
    after_large = (1.0,)  # D
    straddling = 1  # S
    # 24 snapshots (1 h .. 4 h 50) x 8 GPUs of B, each standing for 10 minutes
    before_starved_gpu_hours = 24 * 8 / 6
    after_starved_gpu_hours = 0.0
    before_plans: ClassVar = {"done": 1}
    after_plans: ClassVar = {"aborted": 1, "done": 1}
    after_requeues = 1
    after_gpu_hours_lost = 3.0
    before_dry_run_requeues = 1
    period_hours = 10.0


def snapshot_at(k: int) -> ClusterSnapshot:
    at = T0 + k * STEP
    hours = k * STEP.total_seconds() / 3600
    nodes = (
        Node(name="n1", partitions=("batch",), state="MIXED", gpu_model="h100", gpu_count=8,
             gpu_memory_gb=80.0, topology="nvswitch-8"),
        Node(name="n2", partitions=("batch",), state="MIXED", gpu_model="h100", gpu_count=8,
             gpu_memory_gb=80.0, topology="nvswitch-8"),
        Node(name="n3", partitions=("batch",), state="MIXED", gpu_model="h100", gpu_count=8,
             gpu_memory_gb=80.0, topology="pcie-2x4"),
    )  # fmt: skip
    jobs = []
    for j in JOBS:
        base = {
            "id": j.id, "user": j.user, "account": j.account, "partition": "batch",
            "qos": "normal", "submit_time": h(j.submit), "time_limit_s": int(j.limit_h * 3600),
        }  # fmt: skip
        if j.submit <= hours < j.start:
            request = GpuRequest(gpus_per_node=j.gpus, nvlink=j.gpus > 1)
            jobs.append(Job(**base, state=JobState.PENDING, reason="Resources", request=request))
        elif j.start <= hours and (j.end is None or hours < j.end):
            jobs.append(Job(**base, state=JobState.RUNNING, start_time=h(j.start),
                            gpus={j.node: frozenset(j.idx)}))  # fmt: skip
    return ClusterSnapshot(cluster="constructed", taken_at=at, source="file", nodes=nodes,
                           jobs=tuple(jobs))  # fmt: skip


def snapshots() -> Iterator[ClusterSnapshot]:
    return (snapshot_at(k) for k in range(SNAPSHOTS))


def build(store: Store) -> None:
    """Store the history (each snapshot with its mode) and the three plans."""
    repo = Repository(store)
    for snap in snapshots():
        mode = "dry-run" if snap.taken_at < CHANGE else "enforce"
        repo.save_snapshot(snap, compute(snap), mode)
    minute = timedelta(minutes=1)

    def requeue(job: str, lost: float, state: str, at: datetime) -> tuple[NewStep, str, datetime]:
        args = {"user": "fred", "lost_gpu_hours": lost, "for_users": "|bob|"}
        return NewStep("requeue", job, args), state, at

    plans = repo.plans
    plans.record_past("constructed", "dry-run", "done", created_at=h(3), closed_at=h(3) + minute,
                      steps=[requeue("1", 2.0, "done", h(3) + minute)])  # fmt: skip
    plans.record_past("constructed", "enforce", "done", created_at=h(12),
                      closed_at=h(12) + minute,
                      steps=[requeue("3", 3.0, "done", h(12) + minute)])  # fmt: skip
    plans.record_past("constructed", "enforce", "aborted", created_at=h(14),
                      closed_at=h(14) + minute,
                      steps=[requeue("3", 3.5, "skipped", h(14) + minute)])  # fmt: skip
