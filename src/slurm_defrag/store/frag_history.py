"""Queries behind ``slurm-defrag history``: what fragmentation looked like over a window.

Three views of one window, each answered from raw data where it is still kept and from the
hourly rollups before that (the split point is the cluster's ``rolled_until_t``):

* nodes: the most fragmented nodes, by GPU-hours of free GPUs no pending shape could use,
  and for how long each held such GPUs;
* time: free and unusable GPUs and falsely starved jobs over time, and the worst hours;
* memory: free GPU memory (GB) that no pending job could use, over time.

Node figures are aggregated in SQL (the overlap arithmetic is portable because interval
bounds are epoch numbers); the time series is bucketed in Python, which keeps the SQL free
of dialect-specific date functions and is fast for the ~43k points of a month.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Integer, case, cast, func, select

from slurm_defrag.store.database import Store
from slurm_defrag.store.database_errors import NotFound
from slurm_defrag.store.models import (
    GroupMetric,
    GroupMetricHourly,
    NodeMetric,
    NodeMetricHourly,
    NodeRef,
    RollupProgress,
    Snapshot,
)

RESOLUTIONS = (60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 86400)
MAX_POINTS = 240
SERIES_FIELDS = ("gpus", "free", "unusable", "free_memory_gb", "unusable_memory_gb", "fgd",
                 "pending", "falsely_starved")  # fmt: skip


@dataclass(frozen=True)
class NodeRow:
    node: str
    partitions: tuple[str, ...]
    unusable_gpu_hours: float
    """Sum over time of free GPUs no pending shape could use (GPU-hours)."""
    unusable_hours: float
    """How long the node held at least one such GPU."""
    max_unusable: int
    mean_free: float
    unusable_memory_gb_hours: float


@dataclass(frozen=True)
class Point:
    """Means over one bucket of the series."""

    t: datetime
    samples: int
    gpus: float
    free: float
    unusable: float
    free_memory_gb: float
    unusable_memory_gb: float
    fgd: float
    pending: float
    falsely_starved: float
    max_falsely_starved: int


@dataclass(frozen=True)
class History:
    cluster: str
    scope: str
    """``cluster`` or ``partition``."""
    name: str
    since: datetime
    until: datetime
    resolution_s: int
    snapshots: int
    """Raw snapshots in the window (older parts come from hourly rollups)."""
    series: list[Point]
    worst: list[Point]
    """The worst hours (or buckets, if coarser): most unusable GPUs, then starved jobs."""
    nodes: list[NodeRow]


def load_history(
    store: Store,
    since_s: float,
    *,
    partition: str | None = None,
    cluster: str | None = None,
    now: float | None = None,
    top_nodes: int = 15,
    worst: int = 5,
) -> History:
    """The three views over ``[now - since_s, now]``."""
    now = time.time() if now is None else now
    start = now - since_s
    with store.engine.connect() as conn:
        cluster = cluster or _latest_cluster(conn)
        last = conn.scalar(select(func.max(Snapshot.t)).where(Snapshot.cluster == cluster))
        if last is None:
            raise NotFound(f"no snapshots of cluster {cluster!r} in the database")
        end = min(now, last)
        rolled = conn.scalar(
            select(RollupProgress.rolled_until_t).where(RollupProgress.cluster == cluster)
        )
        split = max(start, rolled or start)
        scope, name = ("partition", partition) if partition else ("cluster", cluster)
        n_raw, step = _raw_extent(conn, cluster, scope, name, split, now)
        resolution = _resolution(since_s, step)
        raw = _raw_points(conn, cluster, scope, name, split, now, resolution)
        raw_hours = _raw_points(conn, cluster, scope, name, split, now, max(resolution, 3600))
        hourly = _hourly_points(conn, cluster, scope, name, start, split)
        if partition and not raw and not hourly:
            known = _partitions(conn, cluster)
            raise NotFound(
                f"no history for partition {partition!r} of cluster {cluster!r} in this "
                f"window (partitions seen: {', '.join(known) or 'none'})"
            )
        nodes = _node_rows(conn, cluster, partition, start, split, end)
    series = _bucket(hourly + raw, resolution)
    ranked = sorted(
        _bucket(hourly + raw_hours, max(resolution, 3600)),
        key=lambda p: (p.unusable, p.falsely_starved),
        reverse=True,
    )
    return History(
        cluster=cluster, scope=scope, name=name,
        since=datetime.fromtimestamp(start, UTC), until=datetime.fromtimestamp(now, UTC),
        resolution_s=resolution, snapshots=n_raw, series=series, worst=ranked[:worst],
        nodes=sorted(nodes, key=lambda r: (-r.unusable_gpu_hours, r.node))[:top_nodes],
    )  # fmt: skip


def _latest_cluster(conn: Connection) -> str:
    row = conn.execute(select(Snapshot.cluster).order_by(Snapshot.id.desc()).limit(1)).first()
    if row is None:
        raise NotFound("no snapshots in the database yet: nothing to show")
    return str(row[0])


def _partitions(conn: Connection, cluster: str) -> list[str]:
    q = select(GroupMetric.name).where(
        GroupMetric.cluster == cluster, GroupMetric.scope == "partition"
    )
    return sorted(set(conn.scalars(q.distinct())))


# A raw or hourly observation: (t, weight, values in SERIES_FIELDS order, max starved).
_Obs = tuple[float, int, tuple[float, ...], int]


def _raw_filter(cluster: str, scope: str, name: str, a: float, b: float) -> list[Any]:
    g = GroupMetric
    return [g.cluster == cluster, g.scope == scope, g.name == name, g.t >= a, g.t <= b]


def _raw_extent(
    conn: Connection, cluster: str, scope: str, name: str, a: float, b: float
) -> tuple[int, float]:
    """(raw points in the window, mean seconds between them)."""
    n, lo, hi = conn.execute(
        select(func.count(), func.min(GroupMetric.t), func.max(GroupMetric.t)).where(
            *_raw_filter(cluster, scope, name, a, b)
        )
    ).one()
    return int(n), (hi - lo) / (n - 1) if n > 1 else 60.0


def _raw_points(
    conn: Connection, cluster: str, scope: str, name: str, a: float, b: float, resolution: int
) -> list[_Obs]:
    """Raw points averaged per bucket in SQL: a month is ~43k rows, the answer ~240."""
    g = GroupMetric
    if conn.dialect.name == "postgresql":
        bucket = func.floor(g.t / resolution) * resolution
    else:  # SQLite may lack floor(); t > 0, so truncation is the floor
        bucket = cast(g.t / resolution, Integer) * resolution
    bucket = bucket.label("bucket")
    rows = conn.execute(
        select(bucket, func.count(), func.max(g.falsely_starved),
               *(func.avg(getattr(g, c)) for c in SERIES_FIELDS))
        .where(*_raw_filter(cluster, scope, name, a, b))
        .group_by(bucket)
        .order_by(bucket)
    )  # fmt: skip
    return [(float(t), int(n), tuple(float(x) for x in v), int(m)) for t, n, m, *v in rows]


def _hourly_points(
    conn: Connection, cluster: str, scope: str, name: str, a: float, b: float
) -> list[_Obs]:
    if b <= a:
        return []
    h = GroupMetricHourly
    cols = [getattr(h, c) for c in SERIES_FIELDS]
    rows = conn.execute(
        select(h.hour_t, h.samples, h.max_falsely_starved, *cols)
        .where(h.cluster == cluster, h.scope == scope, h.name == name,
               h.hour_t >= a // 3600 * 3600, h.hour_t < b)
        .order_by(h.hour_t)
    )  # fmt: skip
    return [(t, n, tuple(v), m) for t, n, m, *v in rows]


def _resolution(since_s: float, step: float) -> int:
    """Bucket size: at most MAX_POINTS buckets, never finer than the snapshots."""
    want = max(since_s / MAX_POINTS, step)
    return next((r for r in RESOLUTIONS if r >= want), RESOLUTIONS[-1])


def _bucket(points: Iterable[_Obs], resolution: int) -> list[Point]:
    acc: dict[float, list[_Obs]] = defaultdict(list)
    for obs in points:
        acc[obs[0] // resolution * resolution].append(obs)
    out = []
    for t, group in sorted(acc.items()):
        n = sum(o[1] for o in group)
        means = [sum(o[2][i] * o[1] for o in group) / n for i in range(len(SERIES_FIELDS))]
        out.append(Point(t=datetime.fromtimestamp(t, UTC), samples=n,
                         **dict(zip(SERIES_FIELDS, means, strict=True)),
                         max_falsely_starved=max(o[3] for o in group)))  # fmt: skip
    return out


def _node_rows(
    conn: Connection, cluster: str, partition: str | None, start: float, split: float, end: float
) -> list[NodeRow]:
    sums: dict[int, list[float]] = defaultdict(lambda: [0.0] * 6)
    parts: dict[int, str] = {}
    for node_id, p, *values in _raw_node_sums(conn, cluster, partition, split, end):
        acc = sums[node_id]
        for i, v in enumerate(values):
            acc[i] = max(acc[i], v or 0) if i == 3 else acc[i] + (v or 0)
        parts[node_id] = p
    if split > start:
        for node_id, p, *values in _hourly_node_sums(conn, cluster, partition, start, split):
            acc = sums[node_id]
            for i, v in enumerate(values):
                acc[i] = max(acc[i], v or 0) if i == 3 else acc[i] + (v or 0)
            parts.setdefault(node_id, p)
    query = select(NodeRef.id, NodeRef.name).where(NodeRef.cluster == cluster)
    names: dict[int, str] = {i: name for i, name in conn.execute(query)}  # noqa: C416
    rows = []
    for node_id, (unusable_gs, unusable_s, mem_gbs, max_u, free_gs, seconds) in sums.items():
        if not seconds:
            continue
        rows.append(NodeRow(
            node=names[node_id], partitions=tuple(x for x in parts[node_id].split(",") if x),
            unusable_gpu_hours=unusable_gs / 3600, unusable_hours=unusable_s / 3600,
            max_unusable=int(max_u), mean_free=free_gs / seconds,
            unusable_memory_gb_hours=mem_gbs / 3600,
        ))  # fmt: skip
    return rows


def _raw_node_sums(
    conn: Connection, cluster: str, partition: str | None, a: float, b: float
) -> Iterable[Any]:
    """Per node: unusable GPU-s, unusable s, unusable GB-s, max unusable, free GPU-s, s."""
    m = NodeMetric
    to_t = func.coalesce(m.to_t, b)
    hi = case((to_t < b, to_t), else_=b)
    lo = case((m.from_t > a, m.from_t), else_=a)
    overlap = hi - lo
    q = (
        select(
            m.node_id, func.max(m.partitions),
            func.sum(m.unusable * overlap),
            func.sum(case((m.unusable > 0, overlap), else_=0.0)),
            func.sum(m.unusable_memory_gb * overlap),
            func.max(m.unusable),
            func.sum(m.free * overlap),
            func.sum(overlap),
        )
        .join(NodeRef, NodeRef.id == m.node_id)
        .where(NodeRef.cluster == cluster, m.from_t < b, to_t > a)
        .group_by(m.node_id)
    )  # fmt: skip
    if partition:
        q = q.where(m.partitions.like(f"%,{partition},%"))
    return conn.execute(q)


def _hourly_node_sums(
    conn: Connection, cluster: str, partition: str | None, a: float, b: float
) -> Iterable[Any]:
    h = NodeMetricHourly
    q = (
        select(
            h.node_id, func.max(h.partitions), func.sum(h.unusable_gpu_seconds),
            func.sum(h.unusable_seconds), func.sum(h.unusable_memory_gb_seconds),
            func.max(h.max_unusable), func.sum(h.free_gpu_seconds), func.sum(h.seconds),
        )
        .join(NodeRef, NodeRef.id == h.node_id)
        .where(NodeRef.cluster == cluster, h.hour_t >= a // 3600 * 3600, h.hour_t < b)
        .group_by(h.node_id)
    )  # fmt: skip
    if partition:
        q = q.where(h.partitions.like(f"%,{partition},%"))
    return conn.execute(q)
