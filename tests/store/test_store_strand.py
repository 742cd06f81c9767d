"""Stranded GPU-hours charged to what held the nodes (store/strand.py): by hand on a tiny
cluster, summed over whole hours by the writer, equal to the node metrics' own total."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import ModuleType

import pytest
from sqlalchemy import func, select

from slurm_defrag.domain.cluster import ClusterSnapshot, GpuRequest, Job, JobState, Node
from slurm_defrag.metrics.compute import compute
from slurm_defrag.store import strand
from slurm_defrag.store.database import Store
from slurm_defrag.store.models import NodeMetric, Snapshot, StrandHourly
from slurm_defrag.store.repo import Repository

T0 = datetime(2026, 4, 2, 8, tzinfo=UTC)


def _node(name: str, model: str, used: frozenset[int] = frozenset()) -> Node:
    return Node(name=name, state="MIXED", gpu_model=model, gpu_count=8, gpu_memory_gb=80.0,
                topology="nvswitch-8", partitions=("batch",), gpus_used=used)  # fmt: skip


def _running(job_id: str, account: str, gpus: set[int], limit_h: float) -> Job:
    return Job(id=job_id, state=JobState.RUNNING, user=f"u{job_id}", account=account,
               partition="batch", qos="normal", submit_time=T0, start_time=T0,
               time_limit_s=int(limit_h * 3600), gpus={"n1": frozenset(gpus)})  # fmt: skip


def _snap(minute: int) -> ClusterSnapshot:
    """n1: job x holds GPU 0, job y GPUs 1-3, GPU 7 busy without a job, 4-6 free; n2 (a100,
    idle); job p waits for 8 NVLink h100 GPUs. No shape of the mix fits n1's 3 free GPUs
    (spatial), nor any GPU of n2 (configuration)."""
    p = Job(id="p", state=JobState.PENDING, reason="Resources", partition="batch",
            request=GpuRequest(gpus_per_node=8, nvlink=True, gpu_model="h100"))  # fmt: skip
    return ClusterSnapshot(
        cluster="tiny", taken_at=T0 + timedelta(minutes=minute),
        nodes=(_node("n1", "h100", frozenset({7})), _node("n2", "a100")),
        jobs=(_running("x", "acct-x", {0}, 2), _running("y", "acct-y", {1, 2, 3}, 48), p),
    )  # fmt: skip


def _rows(
    store: Store, dimension: str
) -> dict[tuple[float, tuple[object, ...]], tuple[float, ...]]:
    """(hour, key) -> GPU-hours by cause, of one dimension's stored rows."""
    s = StrandHourly
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(s.hour_t, s.key, s.spatial_gpu_s, s.topology_gpu_s, s.configuration_gpu_s)
            .where(s.dimension == dimension)
        ).all()  # fmt: skip
    return {(h, strand.decode(k)): (sp / 3600, tp / 3600, cf / 3600) for h, k, sp, tp, cf in rows}


def _hours(store: Store) -> dict[tuple[float, str], tuple[float, ...]]:
    return {(h, str(key[0])): v for (h, key), v in _rows(store, "user").items()}


def test_charges_by_hand(store: Store) -> None:
    repo = Repository(store)
    for minute in range(0, 121, 10):
        snap = _snap(minute)
        report = compute(snap)
        assert report.nodes[0].counts.unusable.spatial == 3
        assert report.nodes[1].counts.unusable.configuration == 8
        repo.save_snapshot(snap, report)
    hour0, hour1 = T0.timestamp(), T0.timestamp() + 3600
    # n1 strands 3 GPUs, 5 are occupied: each occupied GPU is charged 3/5 a second
    expected = {
        "ux": (0.6, 0.0, 0.0),  # 1 GPU
        "uy": (1.8, 0.0, 0.0),  # 3 GPUs
        strand.UNKNOWN_OWNER: (0.6, 0.0, 0.0),  # GPU 7
        strand.CONFIGURATION: (0.0, 0.0, 8.0),  # n2: no pending job can use an a100
    }
    got = _hours(store)
    assert set(got) == {(h, u) for h in (hour0, hour1) for u in expected}  # hours 0 and 1
    for (_, user), figures in got.items():
        assert figures == pytest.approx(expected[user])
    # the other dimensions: y's account, request and time limit; the node's type
    assert _rows(store, "headline")[(hour0, ("", "acct-y", 3, 1, 8, "h100", "nvswitch-8"))][0] == (
        pytest.approx(1.8)
    )
    assert _rows(store, "lifecycle")[(hour0, ("", "1-3d"))][0] == pytest.approx(1.8)
    assert _rows(store, "lifecycle")[(hour0, ("", "1-4h"))][0] == pytest.approx(0.6)  # x: 2 h
    assert _rows(store, "shape")[(hour0, ("", 3, 1))][0] == pytest.approx(1.8)
    assert _rows(store, "account")[(hour0, (strand.CONFIGURATION, ""))][2] == pytest.approx(8.0)
    types = _rows(store, "node_type")
    assert types[(hour0, (8, "h100", "nvswitch-8"))] == pytest.approx((3.0, 0.0, 0.0))
    assert types[(hour0, (8, "a100", "nvswitch-8"))] == pytest.approx((0.0, 0.0, 8.0))


def test_the_sweep_of_any_stretch_adds_up_to_the_stored_hours(store: Store) -> None:
    repo = Repository(store)
    for minute in range(0, 151, 10):
        snap = _snap(minute)
        repo.save_snapshot(snap, compute(snap))
    a, b = T0.timestamp(), T0.timestamp() + 7200
    with store.engine.connect() as conn:
        live = strand.sweep(conn, "tiny", a, b, strand.node_types(conn, "tiny"))
        assert strand.progress(conn, "tiny") == b
    stored = {key: tuple(round(x, 9) for x in v) for key, v in _hours(store).items()}
    assert {
        (h, k.user): tuple(round(x / 3600, 9) for x in v) for (h, k), v in live.items()
    } == stored


def test_charges_equal_the_node_metrics_total(store: Store, churn_module: ModuleType) -> None:
    """Whatever held the nodes, an hour's charges add up to its stranded GPU-seconds
    (history's unusable GPU-hours), over a churning cluster and a restarted writer."""
    sim = churn_module.Churn(40, seed=3, start=T0, ends_per_min=0.3, arrivals_per_min=0.3)
    repo = Repository(store)
    for i in range(30):
        if i == 17:
            repo = Repository(store)
        snap = sim.step(7)
        repo.save_snapshot(snap, compute(snap))
    with store.engine.connect() as conn:
        until = strand.progress(conn, sim.cluster)
        first = conn.scalar(select(func.min(Snapshot.t)))
        charged = conn.scalar(
            select(func.sum(StrandHourly.spatial_gpu_s + StrandHourly.topology_gpu_s
                            + StrandHourly.configuration_gpu_s))
            .where(StrandHourly.dimension == "node_type")
        )  # fmt: skip
        total = 0.0
        for f, t, u in conn.execute(
            select(NodeMetric.from_t, NodeMetric.to_t, NodeMetric.unusable)
        ):
            lo, hi = max(f, first), min(until if t is None else t, until)
            total += u * max(0.0, hi - lo)
    assert until is not None
    assert until > first + 3600
    assert charged == pytest.approx(total)
