"""Snapshots in and out of the database: exact round trips, and only changes are written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from itertools import pairwise
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.metrics.compute import compute
from slurm_defrag.store.database import Store
from slurm_defrag.store.database_errors import NotFound
from slurm_defrag.store.models import GpuAllocation, GroupMetric, JobState, NodeMetric, NodeState
from slurm_defrag.store.repo import Repository
from slurm_defrag.synth import course_scenario, random_cluster
from strategies import snapshots


def _count(store: Store, table: type) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def _save(repo: Repository, snap: ClusterSnapshot) -> int:
    return repo.save_snapshot(snap, compute(snap))


def test_round_trip_is_exact(store: Store) -> None:
    repo = Repository(store)
    course = course_scenario()
    mixed = random_cluster(40, seed=7)
    ids = [_save(repo, course), _save(repo, mixed)]
    assert repo.load_snapshot(ids[0]) == course
    assert repo.load_snapshot(ids[1]) == mixed
    assert repo.load_snapshot(ids[1]).model_dump_json() == mixed.model_dump_json()
    assert repo.latest() == mixed
    assert repo.latest(course.cluster) == course
    assert repo.latest("no-such-cluster") is None


def test_evolving_cluster_writes_only_changes(store: Store, churn_module: ModuleType) -> None:
    sim = churn_module.Churn(60, seed=3, ends_per_min=1, arrivals_per_min=1)
    repo = Repository(store)
    snaps = [sim.step() for _ in range(12)]
    ids = [_save(repo, s) for s in snaps]
    # Every stored snapshot comes back exactly, including ones in the middle of intervals.
    for sid, snap in zip(ids, snaps, strict=True):
        assert repo.load_snapshot(sid) == snap
    # Exactly one row per node or job version: the first snapshot, then only what changed.
    node_versions = len(snaps[0].nodes) + sum(
        sum(a.node_by_name.get(n.name) != n for n in b.nodes) for a, b in pairwise(snaps)
    )
    # (Jobs are compared by id, not put in sets: a Job with default ``gpus`` is unhashable.)
    job_versions = len(snaps[0].jobs) + sum(
        sum(a.job_by_id.get(j.id) != j for j in b.jobs) for a, b in pairwise(snaps)
    )
    assert _count(store, NodeState) == node_versions
    assert _count(store, JobState) == job_versions
    assert node_versions < len(snaps) * len(snaps[0].nodes) / 3  # vs. storing everything
    groups = (
        1
        + len({p for n in snaps[0].nodes for p in n.partitions})
        + len({n.gpu_model for n in snaps[0].nodes})
    )
    assert _count(store, GroupMetric) == groups * len(snaps)


def test_restarted_writer_continues_from_the_database(
    store: Store, churn_module: ModuleType
) -> None:
    sim = churn_module.Churn(30, seed=5)
    first = [sim.step() for _ in range(3)]
    for s in first:
        _save(Repository(store), s)  # a new Repository each time: nothing cached
    repo = Repository(store)
    later = [sim.step() for _ in range(3)]
    ids = [_save(repo, s) for s in later]
    assert [repo.load_snapshot(i) for i in ids] == later
    with store.engine.connect() as conn:  # exactly one open version per GPU held now
        open_allocs = conn.execute(
            select(func.count()).where(GpuAllocation.to_snapshot.is_(None))
        ).scalar_one()
    assert open_allocs == sum(j.gpu_count for j in later[-1].running_gpu_jobs())


def test_node_order_and_taken_at_offset_survive(store: Store) -> None:
    base = random_cluster(12, seed=2)
    odd = base.model_copy(
        update={
            "nodes": tuple(reversed(base.nodes)),
            "jobs": tuple(reversed(base.jobs)),
            "taken_at": datetime(2026, 3, 1, 9, 30, tzinfo=timezone(timedelta(hours=-5))),
        }
    )
    odd = ClusterSnapshot.model_validate(odd.model_dump())
    repo = Repository(store)
    a = _save(repo, odd)
    back_a = repo.load_snapshot(a)
    assert back_a == odd
    assert [n.name for n in back_a.nodes] == [n.name for n in odd.nodes]
    assert back_a.taken_at.utcoffset() == timedelta(hours=-5)


def test_naive_taken_at_stored_by_an_older_version_reads_back_as_utc() -> None:
    """Snapshots now refuse naive times (hostile input: naive ones crashed ``plan``); a row
    an older version stored without an offset must still load, as the UTC it was stored as.
    """
    from slurm_defrag.store import codec

    assert codec.join_taken_at(datetime(2026, 3, 1, 15, 0, tzinfo=UTC), None) == datetime(
        2026, 3, 1, 15, 0, tzinfo=UTC
    )


def test_job_that_leaves_and_returns(store: Store) -> None:
    """A requeued job id that vanished and comes back reuses its identity row."""
    snap = course_scenario()
    without = snap.model_copy(
        update={"jobs": snap.jobs[1:], "taken_at": snap.taken_at + timedelta(minutes=1)}
    )
    again = snap.model_copy(update={"taken_at": snap.taken_at + timedelta(minutes=2)})
    repo = Repository(store)
    ids = [
        _save(repo, s) for s in (snap, ClusterSnapshot.model_validate(without.model_dump()), again)
    ]
    assert repo.load_snapshot(ids[2]) == again
    assert len(repo.load_snapshot(ids[1]).jobs) == len(snap.jobs) - 1


def test_metrics_intervals_follow_node_changes(store: Store, churn_module: ModuleType) -> None:
    sim = churn_module.Churn(40, seed=9)
    repo = Repository(store)
    for _ in range(5):
        _save(repo, sim.step())
    with store.engine.connect() as conn:
        open_rows = conn.execute(
            select(func.count()).where(NodeMetric.to_snapshot.is_(None))
        ).scalar_one()
        bad = conn.execute(
            select(func.count()).where(
                NodeMetric.to_t.is_not(None), NodeMetric.to_t < NodeMetric.from_t
            )
        ).scalar_one()
    assert open_rows == 40  # exactly one current row per node
    assert bad == 0


def test_errors(store: Store) -> None:
    repo = Repository(store)
    with pytest.raises(NotFound, match="no snapshot 999"):
        repo.load_snapshot(999)
    snap = course_scenario()
    other = snap.model_copy(update={"taken_at": datetime(2020, 1, 1, tzinfo=UTC)})
    with pytest.raises(ValueError, match="not computed from this snapshot"):
        repo.save_snapshot(snap, compute(other))


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(snaps=st.lists(snapshots(), min_size=1, max_size=3))
def test_round_trip_property(store: Store, snaps: list[ClusterSnapshot]) -> None:
    """Any snapshot written and read back equals the original, also when written after
    other, unrelated snapshots of the same cluster name (the dedupe must not leak rows
    of one into another)."""
    repo = Repository(store)
    stamped = [
        s.model_copy(update={"taken_at": s.taken_at + timedelta(minutes=i + 1)})
        for i, s in enumerate(snaps)
    ]
    ids = [_save(repo, s) for s in stamped]
    for i, s in zip(ids, stamped, strict=True):
        assert repo.load_snapshot(i) == s


def test_latest_id_at_or_before_a_time(store: Store) -> None:
    repo = Repository(store)
    first = course_scenario()
    later = first.model_copy(update={"taken_at": first.taken_at + timedelta(minutes=5)})
    a, b = _save(repo, first), _save(repo, later)
    assert repo.latest_id() == b
    assert repo.latest_id(at=later.taken_at) == b
    assert repo.latest_id(at=later.taken_at - timedelta(seconds=1)) == a
    assert repo.latest_id(first.cluster, at=first.taken_at) == a
    assert repo.latest_id(at=first.taken_at - timedelta(seconds=1)) is None
    assert repo.latest_id("other", at=later.taken_at) is None


def test_topology_source_and_unknown_nodes_round_trip(store: Store) -> None:
    """Node bodies are the node's JSON: topology_source needs no column (no migration),
    and a live snapshot's unknown nodes stay unknown after a store round trip."""
    course = course_scenario()
    nodes = list(course.nodes)
    nodes[0] = nodes[0].model_copy(update={"topology_source": "collector"})
    nodes[1] = nodes[1].model_copy(update={"topology": None})
    live = course.model_copy(update={"source": "cli", "nodes": tuple(nodes)})
    live = ClusterSnapshot.model_validate(live.model_dump())
    repo = Repository(store)
    back = repo.load_snapshot(_save(repo, live))
    assert back == live
    assert back.nodes[0].topology_source == "collector"
    assert back.unknown_topology_nodes == (nodes[1].name,)


def test_a_drifting_planned_start_is_stored_to_within_the_slack(store: Store) -> None:
    """Backfill re-estimates a pending job's start every pass: small moves keep the stored
    version (one row), a move of the slack or more stores a new one."""
    from slurm_defrag.domain.cluster import JobState as State
    from slurm_defrag.store.snapshots import PLANNED_START_SLACK

    snap = course_scenario()
    pending = next(j for j in snap.jobs if j.state == State.PENDING)
    t0 = snap.taken_at + timedelta(hours=2)

    def at(minutes: int, planned: datetime) -> ClusterSnapshot:
        jobs = tuple(
            j.model_copy(update={"planned_start": planned}) if j.id == pending.id else j
            for j in snap.jobs
        )
        return snap.model_copy(
            update={"jobs": jobs, "taken_at": snap.taken_at + timedelta(minutes=minutes)}
        )

    repo = Repository(store)
    small = t0 + PLANNED_START_SLACK - timedelta(seconds=1)
    far = t0 + PLANNED_START_SLACK
    ids = [_save(repo, at(i, p)) for i, p in enumerate((t0, small, far))]
    assert _count(store, JobState) == len(snap.jobs) + 1  # only the far move is a version
    assert repo.load_snapshot(ids[0]) == at(0, t0)
    assert repo.load_snapshot(ids[1]).job_by_id[pending.id].planned_start == t0
    assert repo.load_snapshot(ids[2]) == at(2, far)


def test_recent_jobs_are_the_last_first_seen_each_as_first_seen(
    store: Store, churn_module: ModuleType
) -> None:
    sim = churn_module.Churn(40, seed=5, ends_per_min=2, arrivals_per_min=2)
    repo = Repository(store)
    snaps = [sim.step() for _ in range(8)]
    for s in snaps:
        _save(repo, s)
    first: dict[str, object] = {}
    for s in snaps:
        for j in s.jobs:
            first.setdefault(j.id, j)
    expected = list(first.values())
    cluster = snaps[0].cluster
    assert repo.recent_jobs(cluster, len(expected) + 10) == expected
    assert repo.recent_jobs(cluster, 5) == expected[-5:]
    assert repo.recent_jobs("no-such-cluster", 5) == []


def test_recent_jobs_skip_a_body_no_longer_readable(store: Store, churn_module: ModuleType) -> None:
    from sqlalchemy import update

    sim = churn_module.Churn(20, seed=2, ends_per_min=1, arrivals_per_min=1)
    repo = Repository(store)
    snap = sim.step()
    _save(repo, snap)
    with store.engine.begin() as conn:
        first = conn.execute(select(func.min(JobState.id))).scalar_one()
        conn.execute(update(JobState).where(JobState.id == first).values(body='{"id": ""}'))
    assert len(repo.recent_jobs(snap.cluster, 100)) == len(snap.jobs) - 1
