"""``job_runs``: one row per start of a GPU job, written by the snapshot writer, filled by
revision 0003 from the job versions an older database holds, and kept by retention as long
as the rollups."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from sqlalchemy import select, text

from slurm_defrag.domain.cluster import ClusterSnapshot, GpuRequest, Job, JobState, Node
from slurm_defrag.metrics.compute import compute
from slurm_defrag.store import migrate
from slurm_defrag.store.database import Store
from slurm_defrag.store.engine import make_engine
from slurm_defrag.store.models import JobRun, Snapshot
from slurm_defrag.store.repo import Repository
from slurm_defrag.store.retention import RetentionPolicy

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
NODE = Node(name="g1", state="MIXED", gpu_model="h100", gpu_count=8, gpu_memory_gb=80.0,
            topology="nvswitch-8", partitions=("batch",))  # fmt: skip


def _job(state: JobState, minute: int, **kw: object) -> Job:
    base: dict[str, object] = {
        "id": "42", "user": "ann", "account": "physics", "partition": "batch", "qos": "high",
        "submit_time": T0, "time_limit_s": 7200,
    }  # fmt: skip
    if state == JobState.PENDING:
        base |= {"reason": "Resources", "request": GpuRequest(gpus_per_node=2, nvlink=True)}
    else:
        base |= {"start_time": T0 + timedelta(minutes=minute), "gpus": {"g1": frozenset({0, 1})}}
    return Job(state=state, **(base | kw))  # type: ignore[arg-type]


def _snap(minute: int, *jobs: Job) -> ClusterSnapshot:
    return ClusterSnapshot(cluster="c", taken_at=T0 + timedelta(minutes=minute), nodes=(NODE,),
                           jobs=jobs)  # fmt: skip


def _runs(store: Store) -> list[JobRun]:
    with store.engine.connect() as conn:
        return list(conn.execute(select(JobRun).order_by(JobRun.id)).all())  # type: ignore[arg-type]


def test_starts_and_restarts_after_a_requeue(store: Store) -> None:
    history = [
        _snap(0, _job(JobState.PENDING, 0)),
        _snap(10, _job(JobState.RUNNING, 7)),  # started between two snapshots
        _snap(20, _job(JobState.RUNNING, 7)),  # still running: no new row
        _snap(30, _job(JobState.PENDING, 0, reason="BeginTime")),  # requeued
        _snap(40, _job(JobState.PENDING, 0)),
        _snap(50, _job(JobState.RUNNING, 45)),  # started again
    ]
    repo = Repository(store)
    for snap in history[:4]:
        repo.save_snapshot(snap, compute(snap))
    repo = Repository(store)  # a restarted writer numbers the next run on
    for snap in history[4:]:
        repo.save_snapshot(snap, compute(snap))
    runs = _runs(store)
    assert [(r.run, r.seen_pending) for r in runs] == [(0, True), (1, True)]
    first, again = runs
    assert (first.user, first.account, first.partition, first.qos) == (
        "ann",
        "physics",
        "batch",
        "high",
    )
    assert (first.gpus, first.nodes, first.gpus_per_node, first.time_limit_s) == (2, 1, 2, 7200)
    assert first.submit_t == T0.timestamp()
    assert first.start_t == (T0 + timedelta(minutes=7)).timestamp()  # Slurm's, not the snapshot's
    assert first.seen_t == (T0 + timedelta(minutes=10)).timestamp()
    assert first.requeued_t is None
    assert again.start_t == (T0 + timedelta(minutes=45)).timestamp()
    # the writer was restarted while the job waited: when it went back is not known
    assert again.requeued_t is None


def test_requeued_time_is_kept_by_one_writer(store: Store) -> None:
    repo = Repository(store)
    for snap in (
        _snap(0, _job(JobState.RUNNING, 0)),  # running when first seen: not seen pending
        _snap(10, _job(JobState.PENDING, 0)),
        _snap(20, _job(JobState.RUNNING, 15)),
    ):
        repo.save_snapshot(snap, compute(snap))
    first, again = _runs(store)
    assert (first.run, first.seen_pending, again.run) == (0, False, 1)
    assert again.requeued_t == (T0 + timedelta(minutes=10)).timestamp()


def test_service_mode_is_stored_with_the_snapshot(store: Store) -> None:
    repo = Repository(store)
    repo.save_snapshot(_snap(0), compute(_snap(0)), "dry-run")
    repo.save_snapshot(_snap(1), compute(_snap(1)))
    with store.engine.connect() as conn:
        assert list(conn.scalars(select(Snapshot.mode).order_by(Snapshot.id))) == ["dry-run", None]


def test_retention_keeps_job_runs_as_long_as_the_rollups(store: Store) -> None:
    repo = Repository(store)
    for snap in (_snap(0, _job(JobState.PENDING, 0)), _snap(10, _job(JobState.RUNNING, 7))):
        repo.save_snapshot(snap, compute(snap))
    policy = RetentionPolicy(snapshot_days=1, rollup_days=30)
    repo.prune(policy, now=(T0 + timedelta(days=10)).timestamp())
    assert len(_runs(store)) == 1  # the job's states are gone, its run is not
    repo.prune(policy, now=(T0 + timedelta(days=31)).timestamp())
    assert _runs(store) == []


def test_0003_fills_job_runs_from_the_stored_job_versions(db_url: str) -> None:
    """An older database's job versions become runs: a start seen after a pending
    version, a job already running in its first version, a requeue and restart."""
    engine = make_engine(db_url)
    migrate.upgrade(engine, "0002")

    def body(state: str, start: int | None = None) -> str:
        data: dict[str, object] = {"id": "x", "state": state, "user": "ann", "account": "phys",
                                   "partition": "batch", "submit_time": T0.isoformat()}  # fmt: skip
        if start is not None:
            data |= {"start_time": (T0 + timedelta(minutes=start)).isoformat(),
                     "gpus": {"g1": [0, 1, 2, 3]}, "time_limit_s": 600}  # fmt: skip
        return json.dumps(data)

    with engine.begin() as conn:
        conn.execute(text("INSERT INTO snapshot_configs (hash, body) VALUES ('h', '{}')"))
        for sid in range(1, 5):
            conn.execute(
                text("INSERT INTO snapshots (id, cluster, taken_at, t, source, schema_version, "
                     "config_hash, nodes, jobs, saved_at) VALUES (:id, 'c', :at, :t, 'file', 1, "
                     "'h', 1, 1, :at)"),
                {"id": sid, "at": T0 + timedelta(minutes=10 * sid),
                 "t": (T0 + timedelta(minutes=10 * sid)).timestamp()},
            )  # fmt: skip
        for ref, job_id in ((1, "7"), (2, "8")):
            conn.execute(
                text("INSERT INTO jobs (id, cluster, job_id, \"user\", account, first_snapshot, "
                     "first_seen_at) VALUES (:id, 'c', :j, 'ann', 'phys', 1, :at)"),
                {"id": ref, "j": job_id, "at": T0},
            )  # fmt: skip
        versions = [
            (1, 1, 2, "PENDING", body("PENDING")),
            (1, 2, 3, "RUNNING", body("RUNNING", 15)),
            (1, 3, 4, "PENDING", body("PENDING")),  # requeued
            (1, 4, None, "RUNNING", body("RUNNING", 38)),
            (2, 1, None, "RUNNING", body("RUNNING", -5)),  # running before the first snapshot
        ]
        for ref, a, b, state, data in versions:
            conn.execute(
                text("INSERT INTO job_states (job_ref, from_snapshot, to_snapshot, state, body) "
                     "VALUES (:r, :a, :b, :s, :body)"),
                {"r": ref, "a": a, "b": b, "s": state, "body": data},
            )  # fmt: skip
    migrate.upgrade(engine)
    with engine.connect() as conn:
        rows = conn.execute(
            select(JobRun.job_id, JobRun.run, JobRun.seen_pending, JobRun.start_t, JobRun.seen_t,
                   JobRun.requeued_t, JobRun.gpus, JobRun.time_limit_s).order_by(JobRun.id)
        ).all()  # fmt: skip
    engine.dispose()
    t = {sid: (T0 + timedelta(minutes=10 * sid)).timestamp() for sid in range(1, 5)}
    at = {m: (T0 + timedelta(minutes=m)).timestamp() for m in (15, 38, -5)}
    assert [tuple(r) for r in rows] == [
        ("7", 0, True, at[15], t[2], None, 4, 600),
        ("7", 1, True, at[38], t[4], t[3], 4, 600),
        ("8", 0, False, at[-5], t[1], None, 4, 600),
    ]
