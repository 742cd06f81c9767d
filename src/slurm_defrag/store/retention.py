"""Retention: full snapshots for a few days, hourly rollups (and job runs) for long, plans for
their audit.

:func:`prune` is what ``slurm-defrag db prune`` runs and what the service's scheduler calls
(daily is enough; it is idempotent and cheap when there is nothing to do). Per cluster, in
one transaction:

1. roll every complete hour older than the snapshot horizon into the hourly tables;
2. delete the snapshots of those hours, *except* any an open plan was made from;
3. delete the closed interval rows no remaining snapshot needs;
4. delete rollups past their own horizon, closed plans past theirs, and orphans.

Only hours already rolled up are ever deleted, so the history views lose resolution, never
data. An open plan pins its snapshot and, through the interval rule in step 3, everything
needed to load it.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, delete, exists, func, insert, select, update

from slurm_defrag.store.database import Store
from slurm_defrag.store.models import (
    OPEN_PLAN_STATUSES,
    GpuAllocation,
    GroupMetric,
    GroupMetricHourly,
    JobRef,
    JobRun,
    JobState,
    NodeMetric,
    NodeMetricHourly,
    NodeRef,
    NodeState,
    Plan,
    PlanStep,
    RollupProgress,
    SlurmCommand,
    Snapshot,
    SnapshotConfig,
)

HOUR = 3600.0
DAY = 86400.0


@dataclass(frozen=True)
class RetentionPolicy:
    snapshot_days: float = 7.0
    """Full snapshots, per-snapshot metrics and per-node intervals."""
    rollup_days: float = 400.0
    """Hourly rollups of cluster, partition, model and node metrics (a year and a bit)."""
    plan_days: float = 90.0
    """Closed plans with their steps and Slurm commands (the audit trail)."""

    def __post_init__(self) -> None:
        if not 0 < self.snapshot_days <= self.rollup_days:
            raise ValueError("need 0 < snapshot_days <= rollup_days")
        if self.plan_days <= 0:
            raise ValueError("plan_days must be positive")


@dataclass
class PruneResult:
    snapshots_deleted: int = 0
    snapshots_kept_for_open_plans: int = 0
    hours_rolled_up: int = 0
    interval_rows_deleted: int = 0
    rollup_rows_deleted: int = 0
    plans_deleted: int = 0
    clusters: list[str] = field(default_factory=list)


def prune(
    store: Store, policy: RetentionPolicy | None = None, now: float | None = None
) -> PruneResult:
    """Apply ``policy`` as of ``now`` (epoch seconds, default: the current time)."""
    policy = policy or RetentionPolicy()
    now = time.time() if now is None else now
    result = PruneResult()
    with store.engine.connect() as conn:
        clusters = sorted(set(conn.scalars(select(Snapshot.cluster).distinct())))
    for cluster in clusters:
        with store.engine.begin() as conn:
            _prune_cluster(conn, cluster, policy, now, result)
        result.clusters.append(cluster)
    with store.engine.begin() as conn:
        _prune_global(conn, policy, now, result)
    return result


def _prune_cluster(
    conn: Connection, cluster: str, policy: RetentionPolicy, now: float, result: PruneResult
) -> None:
    # Snapshots are deleted by whole rolled-up hours: the horizon is rounded down to one.
    until = math.floor((now - policy.snapshot_days * DAY) / HOUR) * HOUR
    result.hours_rolled_up += _roll_up(conn, cluster, until)

    pinned = select(Plan.snapshot_id).where(
        Plan.status.in_(OPEN_PLAN_STATUSES), Plan.snapshot_id.is_not(None)
    )
    old = select(Snapshot.id).where(Snapshot.cluster == cluster, Snapshot.t < until)
    result.snapshots_kept_for_open_plans += (
        conn.scalar(select(func.count()).select_from(old.where(Snapshot.id.in_(pinned)).subquery()))
        or 0
    )
    doomed = old.where(Snapshot.id.not_in(pinned))
    # A closed plan keeps its record but lets go of a snapshot past the horizon.
    conn.execute(update(Plan).where(Plan.snapshot_id.in_(doomed)).values(snapshot_id=None))
    conn.execute(delete(GroupMetric).where(GroupMetric.snapshot_id.in_(doomed)))
    result.snapshots_deleted += conn.execute(
        delete(Snapshot).where(Snapshot.id.in_(doomed))
    ).rowcount

    # Intervals that closed at or before the oldest remaining snapshot serve none of them.
    oldest = conn.scalar(select(func.min(Snapshot.id)).where(Snapshot.cluster == cluster))
    nodes = select(NodeRef.id).where(NodeRef.cluster == cluster)
    jobs = select(JobRef.id).where(JobRef.cluster == cluster)
    deletions: list[Any] = []
    for table, owner, owners in (
        (NodeState, NodeState.node_id, nodes),
        (JobState, JobState.job_ref, jobs),
        (GpuAllocation, GpuAllocation.node_id, nodes),
        (NodeMetric, NodeMetric.node_id, nodes),
    ):
        stmt = delete(table).where(owner.in_(owners), table.to_snapshot.is_not(None))
        if oldest is not None:
            stmt = stmt.where(table.to_snapshot <= oldest)
        if table is NodeMetric:  # and only once the hourly rollup has them
            stmt = stmt.where(NodeMetric.to_t <= until)
        deletions.append(stmt)
    for stmt in deletions:
        result.interval_rows_deleted += conn.execute(stmt).rowcount
    conn.execute(
        delete(JobRef).where(
            JobRef.cluster == cluster,
            ~exists().where(JobState.job_ref == JobRef.id),
            ~exists().where(GpuAllocation.job_ref == JobRef.id),
        )
    )


def _prune_global(
    conn: Connection, policy: RetentionPolicy, now: float, result: PruneResult
) -> None:
    horizon = now - policy.rollup_days * DAY
    result.rollup_rows_deleted += conn.execute(
        delete(GroupMetricHourly).where(GroupMetricHourly.hour_t < horizon)
    ).rowcount
    result.rollup_rows_deleted += conn.execute(
        delete(NodeMetricHourly).where(NodeMetricHourly.hour_t < horizon)
    ).rowcount
    # Job runs are what the rollups' hours are explained with: kept as long as they are.
    result.rollup_rows_deleted += conn.execute(
        delete(JobRun).where(JobRun.start_t < horizon)
    ).rowcount
    plan_horizon = datetime.fromtimestamp(now - policy.plan_days * DAY, UTC)
    closed = select(Plan.id).where(
        Plan.status.not_in(OPEN_PLAN_STATUSES), Plan.closed_at < plan_horizon
    )
    # Children first: explicit, rather than relying on ON DELETE CASCADE being enforced.
    conn.execute(delete(SlurmCommand).where(SlurmCommand.plan_id.in_(closed)))
    conn.execute(
        delete(SlurmCommand).where(
            SlurmCommand.plan_id.is_(None), SlurmCommand.started_at < plan_horizon
        )
    )
    conn.execute(delete(PlanStep).where(PlanStep.plan_id.in_(closed)))
    result.plans_deleted += conn.execute(delete(Plan).where(Plan.id.in_(closed))).rowcount
    conn.execute(
        delete(SnapshotConfig).where(~exists().where(Snapshot.config_hash == SnapshotConfig.hash))
    )


# -- rollups -----------------------------------------------------------------------------


def _roll_up(conn: Connection, cluster: str, until: float) -> int:
    """Aggregate [rolled_until, until) into hourly rows; returns the number of hours."""
    done = conn.scalar(
        select(RollupProgress.rolled_until_t).where(RollupProgress.cluster == cluster)
    )
    first = conn.scalar(select(func.min(Snapshot.t)).where(Snapshot.cluster == cluster))
    if first is None:
        return 0
    start = done if done is not None else math.floor(first / HOUR) * HOUR
    if until <= start:
        return 0
    last = conn.scalar(select(func.max(Snapshot.t)).where(Snapshot.cluster == cluster))
    assert last is not None
    group_rows = _group_hours(conn, cluster, start, until)
    node_rows = _node_hours(conn, cluster, start, min(until, last))
    if group_rows:
        conn.execute(insert(GroupMetricHourly), group_rows)
    if node_rows:
        conn.execute(insert(NodeMetricHourly), node_rows)
    if done is None:
        conn.execute(insert(RollupProgress).values(cluster=cluster, rolled_until_t=until))
    else:
        conn.execute(
            update(RollupProgress)
            .where(RollupProgress.cluster == cluster)
            .values(rolled_until_t=until)
        )
    return len({r["hour_t"] for r in group_rows})


_AVERAGED = ("gpus", "free", "free_memory_gb", "unusable", "unusable_memory_gb", "fgd",
             "pending", "falsely_starved")  # fmt: skip
_AVERAGED_IF_KNOWN = ("unusable_spatial", "unusable_topology", "unusable_configuration",
                      "falsely_starved_gpus")  # fmt: skip
"""Columns NULL in rows stored before revision 0003: an hour's mean only when every sample
has them (a mean of part of the hour would read as the whole hour's)."""


def _group_hours(
    conn: Connection, cluster: str, start: float, until: float
) -> list[dict[str, Any]]:
    cols = [getattr(GroupMetric, c) for c in (*_AVERAGED, *_AVERAGED_IF_KNOWN)]
    rows = conn.execute(
        select(GroupMetric.scope, GroupMetric.name, GroupMetric.t, *cols).where(
            GroupMetric.cluster == cluster, GroupMetric.t >= start, GroupMetric.t < until
        )
    )
    acc: dict[tuple[str, str, float], list[tuple[float, ...]]] = defaultdict(list)
    for scope, name, t, *values in rows:
        acc[(scope, name, math.floor(t / HOUR) * HOUR)].append(tuple(values))
    out = []
    for (scope, name, hour), samples in acc.items():
        n = len(samples)
        means: dict[str, float | None] = {
            c: sum(s[i] for s in samples) / n for i, c in enumerate(_AVERAGED)
        }
        for i, c in enumerate(_AVERAGED_IF_KNOWN, len(_AVERAGED)):
            known = [s[i] for s in samples if s[i] is not None]
            means[c] = sum(known) / n if len(known) == n else None
        out.append({
            "cluster": cluster, "scope": scope, "name": name, "hour_t": hour, "samples": n,
            **means,
            "max_unusable": int(max(s[_AVERAGED.index("unusable")] for s in samples)),
            "max_falsely_starved": int(max(s[_AVERAGED.index("falsely_starved")] for s in samples)),
        })  # fmt: skip
    return out


def _node_hours(conn: Connection, cluster: str, start: float, end: float) -> list[dict[str, Any]]:
    """Split each node-metric interval overlapping [start, end) at hour boundaries."""
    if end <= start:
        return []
    rows = conn.execute(
        select(
            NodeMetric.node_id, NodeMetric.partitions, NodeMetric.from_t, NodeMetric.to_t,
            NodeMetric.free, NodeMetric.unusable, NodeMetric.unusable_memory_gb,
        )
        .join(NodeRef, NodeRef.id == NodeMetric.node_id)
        .where(
            NodeRef.cluster == cluster,
            NodeMetric.from_t < end,
            (NodeMetric.to_t.is_(None)) | (NodeMetric.to_t > start),
        )
    )  # fmt: skip
    acc: dict[tuple[int, float], dict[str, Any]] = {}
    for node_id, parts, a, b, free, unusable, mem in rows:
        for hour, seconds in _hour_pieces(max(a, start), min(end if b is None else b, end)):
            r = acc.setdefault((node_id, hour), _empty_node_hour(node_id, hour, parts))
            r["partitions"] = parts
            r["seconds"] += seconds
            r["free_gpu_seconds"] += free * seconds
            if unusable:
                r["unusable_seconds"] += seconds
                r["unusable_gpu_seconds"] += unusable * seconds
                r["unusable_memory_gb_seconds"] += mem * seconds
                r["max_unusable"] = max(r["max_unusable"], unusable)
    return list(acc.values())


def _empty_node_hour(node_id: int, hour: float, parts: str) -> dict[str, Any]:
    return {
        "node_id": node_id, "hour_t": hour, "partitions": parts, "seconds": 0.0,
        "unusable_seconds": 0.0, "unusable_gpu_seconds": 0.0,
        "unusable_memory_gb_seconds": 0.0, "free_gpu_seconds": 0.0, "max_unusable": 0,
    }  # fmt: skip


def _hour_pieces(a: float, b: float) -> Iterable[tuple[float, float]]:
    """(hour start, seconds) pieces of [a, b)."""
    while a < b:
        hour = math.floor(a / HOUR) * HOUR
        stop = min(b, hour + HOUR)
        yield hour, stop - a
        a = stop
