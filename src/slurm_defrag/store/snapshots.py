"""Saving snapshots as interval rows, and loading any stored snapshot back.

The writer keeps, per cluster, what is currently valid (the open intervals) in memory, so a
save compares the new snapshot with the previous one in Python and touches only rows that
changed: it closes their open interval (``to_snapshot = new id``) and inserts a new one.
Before trusting its memory it checks that the newest snapshot of the cluster in the
database is the one it wrote last; if not (restart, another writer), it reloads the open
intervals from the database.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection, Engine, func, insert, or_, select, tuple_, update

from slurm_defrag.domain.cluster import ClusterSnapshot, Job, Node
from slurm_defrag.metrics.report import FragReport
from slurm_defrag.store import codec, strand
from slurm_defrag.store.database_errors import NotFound
from slurm_defrag.store.models import (
    GpuAllocation,
    GroupMetric,
    JobRef,
    JobRun,
    JobState,
    NodeMetric,
    NodeRef,
    NodeState,
    Snapshot,
    SnapshotConfig,
)


@dataclass
class _Current:
    """The open intervals of one cluster, as of snapshot ``last_id``."""

    last_id: int | None = None
    config_hash: str | None = None
    node_ids: dict[str, int] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    job_refs: dict[str, int] = field(default_factory=dict)
    jobs: dict[str, Job] = field(default_factory=dict)
    allocs: dict[tuple[str, int], str] = field(default_factory=dict)
    metrics: dict[str, codec.MetricKey] = field(default_factory=dict)
    runs: dict[str, int] = field(default_factory=dict)
    """Job id -> starts recorded in ``job_runs`` (of the jobs in the snapshot)."""
    back_at: dict[str, float] = field(default_factory=dict)
    """Job id -> when a snapshot first saw it waiting, since it last held GPUs (or ever)."""
    strand_until: float | None = None
    """Hours before this are in ``strand_hourly`` (None: not read from the database yet)."""


class SnapshotWriter:
    """Writes snapshots of any number of clusters; one instance per process."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._current: dict[str, _Current] = {}

    def save(self, snapshot: ClusterSnapshot, report: FragReport, mode: str | None = None) -> int:
        """Store ``snapshot`` and its metrics in one transaction; returns the snapshot id.

        ``mode``: the service's mode (``off``, ``dry-run``, ``enforce``) as it stores the
        snapshot; None when a command or a test stores one."""
        if report.cluster != snapshot.cluster or report.taken_at != snapshot.taken_at:
            raise ValueError("report was not computed from this snapshot")
        try:
            with self._engine.begin() as conn:
                if conn.dialect.name == "postgresql":
                    # Observations, not orders: a server crash may lose the last few
                    # snapshots (never corrupt them), and commits stop waiting for fsync.
                    conn.exec_driver_sql("SET LOCAL synchronous_commit = off")
                cur = self._load_current(conn, snapshot.cluster)
                sid = self._write(conn, cur, snapshot, report, mode)
        except BaseException:
            # The transaction rolled back but memory may be half-updated: forget it.
            self._current.pop(snapshot.cluster, None)
            raise
        cur.last_id = sid
        return sid

    # -- current state ---------------------------------------------------------------

    def _load_current(self, conn: Connection, cluster: str) -> _Current:
        cached = self._current.get(cluster)
        if cached is not None and cached.last_id is not None:
            # A primary-key range probe, cheap however many snapshots are stored: is our
            # last snapshot still the newest (nobody else saved one, retention did not
            # delete it)?
            newest = conn.execute(
                select(func.max(Snapshot.id)).where(
                    Snapshot.id >= cached.last_id, Snapshot.cluster == cluster
                )
            ).scalar_one()
            if newest == cached.last_id:
                return cached
        newest = conn.execute(
            select(func.max(Snapshot.id)).where(Snapshot.cluster == cluster)
        ).scalar_one()
        cur = _read_current(conn, cluster, newest)
        self._current[cluster] = cur
        return cur

    # -- one save --------------------------------------------------------------------

    def _write(
        self,
        conn: Connection,
        cur: _Current,
        snap: ClusterSnapshot,
        report: FragReport,
        mode: str | None,
    ) -> int:
        config_hash, body = codec.config_body(snap)
        if config_hash != cur.config_hash:
            exists = conn.execute(
                select(SnapshotConfig.hash).where(SnapshotConfig.hash == config_hash)
            ).first()
            if exists is None:
                conn.execute(insert(SnapshotConfig).values(hash=config_hash, body=body))
            cur.config_hash = config_hash
        taken_utc, offset = codec.split_taken_at(snap.taken_at)
        t = codec.epoch(snap.taken_at)
        sid: int = conn.execute(
            insert(Snapshot)
            .values(
                cluster=snap.cluster,
                taken_at=taken_utc,
                tz_offset_s=offset,
                t=t,
                source=snap.source,
                schema_version=snap.schema_version,
                config_hash=config_hash,
                node_order=codec.order_exception([n.name for n in snap.nodes]),
                job_order=codec.order_exception([j.id for j in snap.jobs]),
                nodes=len(snap.nodes),
                jobs=len(snap.jobs),
                mode=mode,
            )
            .returning(Snapshot.id)
        ).scalar_one()
        self._write_nodes(conn, cur, snap, sid)
        before, after = self._write_jobs(conn, cur, snap, sid, t)
        self._write_allocations(conn, cur, before, after, sid)
        self._write_node_metrics(conn, cur, report, sid, t)
        conn.execute(insert(GroupMetric), codec.group_rows(report, sid, t))
        self._write_strand(conn, cur, snap, t)
        return sid

    def _write_strand(
        self, conn: Connection, cur: _Current, snap: ClusterSnapshot, t: float
    ) -> None:
        """Charge the hours this snapshot completes to what held the nodes (strand.py):
        one sweep over an hour of intervals, once an hour, in the same transaction."""
        if cur.strand_until is None:
            cur.strand_until = strand.progress(conn, snap.cluster)
        if cur.strand_until is not None and t < cur.strand_until + strand.HOUR:
            return
        types = strand.node_types_of(snap, cur.node_ids)
        cur.strand_until = strand.fill_hours(conn, snap.cluster, t, types)

    def _write_nodes(
        self, conn: Connection, cur: _Current, snap: ClusterSnapshot, sid: int
    ) -> None:
        changed = [n for n in snap.nodes if not _same(cur.nodes.get(n.name), n)]
        gone = cur.nodes.keys() - {n.name for n in snap.nodes}
        self._ensure_nodes(conn, cur, snap.cluster, [n.name for n in changed])
        _close(
            conn,
            NodeState,
            NodeState.node_id,
            [cur.node_ids[x] for x in (*gone, *(n.name for n in changed)) if x in cur.nodes],
            sid,
        )
        if changed:
            conn.execute(
                insert(NodeState),
                [
                    {
                        "node_id": cur.node_ids[n.name],
                        "from_snapshot": sid,
                        "state": "+".join(sorted(n.state)),
                        "gpus_used": len(n.gpus_used),
                        "body": codec.node_body(n),
                    }
                    for n in changed
                ],
            )
        for name in gone:
            del cur.nodes[name]
        cur.nodes.update((n.name, n) for n in changed)

    def _write_jobs(
        self, conn: Connection, cur: _Current, snap: ClusterSnapshot, sid: int, t: float
    ) -> tuple[list[Job], list[Job]]:
        """Store changed jobs; returns (old versions replaced or gone, new versions)."""
        changed = [j for j in snap.jobs if not _same(cur.jobs.get(j.id), j)]
        gone = cur.jobs.keys() - {j.id for j in snap.jobs}
        before = [cur.jobs[x] for x in (*gone, *(j.id for j in changed)) if x in cur.jobs]
        self._ensure_jobs(conn, cur, snap, [j for j in changed if j.id not in cur.job_refs], sid)
        self._write_runs(conn, cur, snap.cluster, changed, t)
        _close(
            conn,
            JobState,
            JobState.job_ref,
            [cur.job_refs[x] for x in (*gone, *(j.id for j in changed)) if x in cur.jobs],
            sid,
        )
        if changed:
            conn.execute(
                insert(JobState),
                [
                    {
                        "job_ref": cur.job_refs[j.id],
                        "from_snapshot": sid,
                        "state": j.state.value,
                        "body": j.model_dump_json(),
                    }
                    for j in changed
                ],
            )
        for jid in gone:
            del cur.jobs[jid]
            # A finished job leaves the cache; if its id ever shows up again the database
            # lookup in _ensure_jobs finds its identity row.
            cur.job_refs.pop(jid, None)
            cur.runs.pop(jid, None)
            cur.back_at.pop(jid, None)
        cur.jobs.update((j.id, j) for j in changed)
        return before, changed

    def _write_runs(
        self, conn: Connection, cur: _Current, cluster: str, changed: list[Job], t: float
    ) -> None:
        """A ``job_runs`` row for each changed job that holds GPUs now and did not in the
        previous snapshot (or was not in it): a start, first or after a requeue. Called
        before the cache takes the new versions: ``cur.jobs`` still holds the old ones."""
        rows = []
        for job in changed:
            old = cur.jobs.get(job.id)
            if not job.holds_gpus:
                if old is None or old.holds_gpus:
                    cur.back_at[job.id] = t  # waiting, first or again
                continue
            if old is not None and old.holds_gpus:
                continue
            run = cur.runs.get(job.id, 0)
            per_node = [len(idx) for idx in job.gpus.values()]
            rows.append({
                "cluster": cluster, "job_id": job.id, "job_ref": cur.job_refs[job.id],
                "run": run, "user": job.user, "account": job.account,
                "partition": job.partition, "qos": job.qos, "gpus": sum(per_node),
                "nodes": len(per_node), "gpus_per_node": max(per_node),
                "time_limit_s": job.time_limit_s,
                "submit_t": None if job.submit_time is None else codec.epoch(job.submit_time),
                "start_t": t if job.start_time is None else codec.epoch(job.start_time),
                "seen_t": t, "seen_pending": old is not None,
                "requeued_t": cur.back_at.get(job.id) if run else None,
            })  # fmt: skip
            cur.runs[job.id] = run + 1
            cur.back_at.pop(job.id, None)
        if rows:
            conn.execute(insert(JobRun), rows)

    def _write_allocations(
        self, conn: Connection, cur: _Current, before: list[Job], after: list[Job], sid: int
    ) -> None:
        # GPU ownership only moves when a job changes, so only changed jobs are looked at:
        # a full comparison of every GPU of a big cluster would cost more than the write.
        old = dict(_held(before))
        now = dict(_held(after))
        changed = {k for k in old.keys() | now.keys() if now.get(k) != cur.allocs.get(k)}
        closing = [k for k in changed if k in cur.allocs]
        if closing:
            # One statement with a row-value IN, not one UPDATE per GPU.
            pairs = [(cur.node_ids[node], g) for node, g in closing]
            conn.execute(
                update(GpuAllocation)
                .where(
                    tuple_(GpuAllocation.node_id, GpuAllocation.gpu_index).in_(pairs),
                    GpuAllocation.to_snapshot.is_(None),
                )
                .values(to_snapshot=sid)
            )
        opening = [k for k in changed if k in now]
        if opening:
            conn.execute(
                insert(GpuAllocation),
                [
                    {
                        "node_id": cur.node_ids[node],
                        "gpu_index": g,
                        "job_ref": cur.job_refs[now[(node, g)]],
                        "from_snapshot": sid,
                    }
                    for node, g in opening
                ],
            )
        for k in closing:
            del cur.allocs[k]
        cur.allocs.update((k, now[k]) for k in opening)

    def _write_node_metrics(
        self, conn: Connection, cur: _Current, report: FragReport, sid: int, t: float
    ) -> None:
        now = codec.metric_keys(report.nodes)
        changed = [n for n, key in now.items() if cur.metrics.get(n) != key]
        gone = cur.metrics.keys() - now.keys()
        closing = [cur.node_ids[n] for n in (*gone, *changed) if n in cur.metrics]
        if closing:
            conn.execute(
                update(NodeMetric)
                .where(NodeMetric.node_id.in_(closing), NodeMetric.to_snapshot.is_(None))
                .values(to_snapshot=sid, to_t=t)
            )
        self._ensure_nodes(conn, cur, report.cluster, changed)
        if changed:
            conn.execute(
                insert(NodeMetric),
                [
                    {
                        "node_id": cur.node_ids[n],
                        "from_snapshot": sid,
                        "from_t": t,
                        **dict(zip(codec.METRIC_COLUMNS, now[n], strict=True)),
                    }
                    for n in changed
                ],
            )
        for n in gone:
            del cur.metrics[n]
        cur.metrics.update((n, now[n]) for n in changed)

    # -- identities ------------------------------------------------------------------

    def _ensure_nodes(
        self, conn: Connection, cur: _Current, cluster: str, names: Iterable[str]
    ) -> None:
        new = [n for n in names if n not in cur.node_ids]
        if not new:
            return
        rows = conn.execute(
            insert(NodeRef).returning(NodeRef.id, NodeRef.name, sort_by_parameter_order=True),
            [{"cluster": cluster, "name": n} for n in new],
        )
        cur.node_ids.update((name, i) for i, name in rows)

    def _ensure_jobs(
        self,
        conn: Connection,
        cur: _Current,
        snap: ClusterSnapshot,
        jobs: Sequence[Job],
        sid: int,
    ) -> None:
        if not jobs:
            return
        known = conn.execute(
            select(JobRef.job_id, JobRef.id).where(
                JobRef.cluster == snap.cluster, JobRef.job_id.in_([j.id for j in jobs])
            )
        ).all()
        cur.job_refs.update((jid, i) for jid, i in known)
        new = [j for j in jobs if j.id not in cur.job_refs]
        if not new:
            return
        taken_utc, _ = codec.split_taken_at(snap.taken_at)
        rows = conn.execute(
            insert(JobRef).returning(JobRef.id, JobRef.job_id, sort_by_parameter_order=True),
            [
                {
                    "cluster": snap.cluster,
                    "job_id": j.id,
                    "user": j.user,
                    "account": j.account,
                    "first_snapshot": sid,
                    "first_seen_at": taken_utc,
                }
                for j in new
            ],
        )
        cur.job_refs.update((jid, i) for i, jid in rows)


def _held(jobs: Iterable[Job]) -> Iterator[tuple[tuple[str, int], str]]:
    """((node, GPU index), job id) for every GPU the jobs hold."""
    for job in jobs:
        if job.holds_gpus:
            for node, idx in job.gpus.items():
                for g in idx:
                    yield (node, g), job.id


PLANNED_START_SLACK = timedelta(minutes=10)
"""A pending job whose only change is its planned start, moved by less than this, keeps
its stored version: backfill re-estimates every pass (30 s), and a new job version each
time would grow the store by the whole pending queue every cycle. A snapshot read back
holds the planned start as last stored, at most this far off; everything else is exact."""


def _same(old: Node | Job | None, new: Node | Job) -> bool:
    # Identity first: a caller that evolves a snapshot reuses unchanged objects.
    if old is new or (old is not None and old == new):
        return True
    if not isinstance(old, Job) or not isinstance(new, Job):
        return False
    a, b = old.planned_start, new.planned_start
    if a is None or b is None or abs(a - b) >= PLANNED_START_SLACK:
        return False
    return old == new.model_copy(update={"planned_start": a})


def _close(
    conn: Connection, table: type[NodeState] | type[JobState], key: Any, ids: list[int], sid: int
) -> None:
    if ids:
        conn.execute(
            update(table).where(key.in_(ids), table.to_snapshot.is_(None)).values(to_snapshot=sid)
        )


def _read_current(conn: Connection, cluster: str, last_id: int | None) -> _Current:
    cur = _Current(last_id=last_id)
    cur.node_ids = {
        name: i
        for i, name in conn.execute(
            select(NodeRef.id, NodeRef.name).where(NodeRef.cluster == cluster)
        )
    }
    by_id = {i: name for name, i in cur.node_ids.items()}
    for node_id, body in conn.execute(
        select(NodeState.node_id, NodeState.body)
        .join(NodeRef, NodeRef.id == NodeState.node_id)
        .where(NodeRef.cluster == cluster, NodeState.to_snapshot.is_(None))
    ):
        cur.nodes[by_id[node_id]] = Node.model_validate_json(body)
    for job_id, ref, body in conn.execute(
        select(JobRef.job_id, JobRef.id, JobState.body)
        .join(JobRef, JobRef.id == JobState.job_ref)
        .where(JobRef.cluster == cluster, JobState.to_snapshot.is_(None))
    ):
        cur.job_refs[job_id] = ref
        cur.jobs[job_id] = Job.model_validate_json(body)
    # Starts already recorded of the jobs still there: a restarted writer numbers the
    # next run on. When they went back to the queue is not kept (requeued_t stays NULL).
    open_refs = (
        select(JobState.job_ref)
        .join(JobRef, JobRef.id == JobState.job_ref)
        .where(JobRef.cluster == cluster, JobState.to_snapshot.is_(None))
    )
    for job_id, runs in conn.execute(
        select(JobRun.job_id, func.max(JobRun.run) + 1)
        .where(JobRun.job_ref.in_(open_refs))
        .group_by(JobRun.job_id)
    ):
        cur.runs[job_id] = int(runs)
    for node_id, g, job_id in conn.execute(
        select(GpuAllocation.node_id, GpuAllocation.gpu_index, JobRef.job_id)
        .join(JobRef, JobRef.id == GpuAllocation.job_ref)
        .where(JobRef.cluster == cluster, GpuAllocation.to_snapshot.is_(None))
    ):
        cur.allocs[(by_id[node_id], g)] = job_id
    cols = [getattr(NodeMetric, c) for c in codec.METRIC_COLUMNS]
    for node_id, *values in conn.execute(
        select(NodeMetric.node_id, *cols)
        .join(NodeRef, NodeRef.id == NodeMetric.node_id)
        .where(NodeRef.cluster == cluster, NodeMetric.to_snapshot.is_(None))
    ):
        key = tuple(values)
        cur.metrics[by_id[node_id]] = (  # rebuilt with Python types: bool, int, float
            str(key[0]),
            bool(key[1]),
            int(key[2]),
            float(key[3]),
            int(key[4]),
            int(key[5]),
            int(key[6]),
            int(key[7]),
            float(key[8]),
            int(key[9]),
        )
    if last_id is not None:
        cur.config_hash = conn.execute(
            select(Snapshot.config_hash).where(Snapshot.id == last_id)
        ).scalar_one()
    return cur


# -- reading -----------------------------------------------------------------------------


def _valid_at(table: type[NodeState] | type[JobState], sid: int) -> Any:
    return (table.from_snapshot <= sid) & or_(table.to_snapshot.is_(None), table.to_snapshot > sid)


def load(conn: Connection, sid: int) -> ClusterSnapshot:
    """The snapshot ``sid`` as it was saved (a pending job's planned start to within
    :data:`PLANNED_START_SLACK`)."""
    snap = conn.execute(select(*Snapshot.__table__.c).where(Snapshot.id == sid)).first()
    if snap is None:
        raise NotFound(f"no snapshot {sid} in the database (pruned, or never saved)")
    config = conn.execute(
        select(SnapshotConfig.body).where(SnapshotConfig.hash == snap.config_hash)
    ).scalar_one()
    nodes = {
        name: json.loads(body)
        for name, body in conn.execute(
            select(NodeRef.name, NodeState.body)
            .join(NodeRef, NodeRef.id == NodeState.node_id)
            .where(NodeRef.cluster == snap.cluster, _valid_at(NodeState, sid))
        )
    }
    jobs = {
        jid: json.loads(body)
        for jid, body in conn.execute(
            select(JobRef.job_id, JobState.body)
            .join(JobRef, JobRef.id == JobState.job_ref)
            .where(JobRef.cluster == snap.cluster, _valid_at(JobState, sid))
        )
    }
    data: dict[str, Any] = {
        "schema_version": snap.schema_version,
        "cluster": snap.cluster,
        "taken_at": codec.join_taken_at(snap.taken_at, snap.tz_offset_s),
        "source": snap.source,
        **json.loads(config),
        "nodes": codec.restore_order(nodes, snap.node_order),
        "jobs": codec.restore_order(jobs, snap.job_order),
    }
    return ClusterSnapshot.model_validate(data)


def recent_jobs(conn: Connection, cluster: str, limit: int) -> list[Job]:
    """The last ``limit`` jobs first seen in ``cluster``'s snapshots, oldest first, each as
    it was when first seen (what it asked for, before it ran)."""
    refs = (
        select(JobRef.id)
        .where(JobRef.cluster == cluster)
        .order_by(JobRef.id.desc())
        .limit(limit)
        .subquery()
    )
    # each job's first version only (ids grow with time): a pending job may have many
    firsts = (
        select(func.min(JobState.id))
        .where(JobState.job_ref.in_(select(refs.c.id)))
        .group_by(JobState.job_ref)
    )
    out: list[Job] = []
    for _, body in conn.execute(
        select(JobState.job_ref, JobState.body)
        .where(JobState.id.in_(firsts))
        .order_by(JobState.job_ref)
    ):
        try:
            out.append(Job.model_validate_json(body))
        except ValidationError:  # stored by an older release, unreadable now: skip it
            continue
    return out


def latest_id(
    conn: Connection, cluster: str | None = None, at: datetime | None = None
) -> int | None:
    """The id of the last snapshot saved (of ``cluster``, or of any cluster), of those
    taken at or before ``at`` if given."""
    query = select(func.max(Snapshot.id))
    if cluster is not None:
        query = query.where(Snapshot.cluster == cluster)
    if at is not None:
        query = query.where(Snapshot.t <= at.timestamp())
    value: int | None = conn.execute(query).scalar_one()
    return value
