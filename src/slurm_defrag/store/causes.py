"""Queries behind ``slurm-defrag report causes``: why the cluster fragments.

Stranded GPU-hours (free GPUs no pending job could use, by cause: the metrics' own
``unusable``) are charged hour by hour to what held the nodes they were on
(:mod:`slurm_defrag.store.strand`: the jobs in proportion to their GPUs, an idle node,
an unknown owner). This module sums those charges over a window and reads them along the
four dimensions of fragmentation:

* **job lifecycles**: the time limits of the jobs holding the nodes (a long job pins the
  node it fragments);
* **request granularity**: their request shapes (small requests scattered over big nodes);
* **scheduling policy**: their partitions and QOS, and how much of the stranding is
  spatial (free GPUs scattered by placement: what packing and defragmentation address);
* **topology constraints**: the node types (GPU count, model, NVLink topology) and how
  much of it is topology (enough free GPUs, not NVLink-connected) or configuration (a GPU
  model or node no pending job asks for);

plus who (accounts, users), the top combinations (account x request shape x node type,
the headline), and the worst hours with what held the nodes then. Whole hours: the window
starts at the hour that holds ``now - since``. Hours already stored are summed in SQL; the
rest (the current hour, or hours a just-upgraded database has not filled yet) are swept
from the intervals at query time.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, func, select

from slurm_defrag.store import strand
from slurm_defrag.store.database import Store
from slurm_defrag.store.database_errors import NotFound
from slurm_defrag.store.models import GroupMetricHourly, Snapshot, StrandHourly
from slurm_defrag.store.strand import CONFIGURATION, IDLE_NODE

HOUR = 3600.0
CAUSES = ("spatial", "topology", "configuration")


@dataclass(frozen=True)
class Contributor:
    name: str
    """How the report names it (``1-GPU jobs of account a on 8-GPU h100 NVSwitch nodes``)."""
    key: dict[str, Any]
    """The values it groups (account, shape, node type, ...)."""
    gpu_hours: float
    share: float
    """Of all stranded GPU-hours of the window."""
    spatial: float
    topology: float
    configuration: float


@dataclass(frozen=True)
class Dimension:
    key: str
    """``lifecycles``, ``granularity``, ``policy`` or ``topology``."""
    title: str
    reading: str
    rows: list[Contributor]


@dataclass(frozen=True)
class WorstHour:
    start: datetime
    stranded_gpus: float
    """Mean stranded GPUs over the hour."""
    top: str
    """What held the nodes most: a headline name."""
    top_share: float


@dataclass(frozen=True)
class HourPoint:
    """Mean stranded GPUs over one hour, by cause."""

    t: datetime
    spatial: float
    topology: float
    configuration: float


@dataclass(frozen=True)
class Causes:
    cluster: str
    since: datetime
    until: datetime
    hours: float
    stranded_gpu_hours: float
    by_cause: dict[str, float]
    reading: str
    """The headline in one line."""
    headline: list[Contributor]
    dimensions: list[Dimension]
    accounts: list[Contributor]
    users: list[Contributor]
    worst: list[WorstHour]
    hourly: list[HourPoint]
    swept_hours: float
    """Hours computed at query time (not stored yet)."""
    notes: list[str] = field(default_factory=list)


Sums = dict[str, dict[tuple[Any, ...], list[float]]]
"""dimension -> key -> GPU-seconds [spatial, topology, configuration]."""


def load_causes(
    store: Store,
    since_s: float,
    *,
    cluster: str | None = None,
    now: float | None = None,
    top: int = 5,
    worst: int = 5,
) -> Causes:
    """Stranded GPU-hours of ``[now - since_s, now]`` and what stranded them.

    Raises
    ------
    NotFound
        No snapshot in the database or in the window.
    """
    now = time.time() if now is None else now
    with store.engine.connect() as conn:
        cluster = cluster or _latest_cluster(conn)
        first, last = _extent(conn, cluster, now - since_s, now)
        a = math.floor(max(now - since_s, first) / HOUR) * HOUR
        end = min(now, last)
        done = strand.progress(conn, cluster)
        # stored hours are whole: those ending by the window's end, the rest is swept
        stored_until = a if done is None else max(a, min(done, math.floor(end / HOUR) * HOUR))
        sums = _stored(conn, cluster, a, stored_until)
        per_hour = _stored_hours(conn, cluster, a, stored_until)
        live: strand.Projected = {}
        if end > stored_until:
            types = strand.node_types(conn, cluster)
            live = strand.project(strand.sweep(conn, cluster, stored_until, end, types))
        for (hour, name, key), values in live.items():
            _add(sums.setdefault(name, {}).setdefault(key, [0.0, 0.0, 0.0]), values)
            if name == _EVERY:
                _add(per_hour.setdefault(hour, [0.0, 0.0, 0.0]), values)
        totals = {h: sum(v) for h, v in per_hour.items()}
        worst_hours = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:worst]
        worst_keys = _hour_keys(conn, cluster, [h for h, _ in worst_hours], live)
    total_s = sum(sum(v) for v in sums.get(_EVERY, {}).values())
    hours = max(0.0, end - a) / HOUR
    # every hour of the window: an hour without stranded GPUs has no row, and is a 0
    zero = [0.0, 0.0, 0.0]
    hourly = [
        HourPoint(datetime.fromtimestamp(h, UTC), *(x / HOUR for x in per_hour.get(h, zero)))
        for h in (a + i * HOUR for i in range(math.ceil((end - a) / HOUR)))
    ]
    return _assemble(cluster, a, end, hours, total_s, sums, worst_hours, worst_keys, top,
                     (end - stored_until) / HOUR, hourly)  # fmt: skip


_EVERY = "node_type"
"""A dimension every charge is under with its node only: totals and the hourly series."""


def _add(acc: list[float], values: list[float]) -> None:
    for i, v in enumerate(values):
        acc[i] += v


def _latest_cluster(conn: Connection) -> str:
    row = conn.execute(select(Snapshot.cluster).order_by(Snapshot.id.desc()).limit(1)).first()
    if row is None:
        raise NotFound("no snapshots in the database yet: nothing to report")
    return str(row[0])


def _extent(conn: Connection, cluster: str, start: float, now: float) -> tuple[float, float]:
    lo, hi = conn.execute(
        select(func.min(Snapshot.t), func.max(Snapshot.t)).where(
            Snapshot.cluster == cluster, Snapshot.t >= start, Snapshot.t <= now
        )
    ).one()
    hourly = conn.scalar(
        select(func.min(GroupMetricHourly.hour_t)).where(
            GroupMetricHourly.cluster == cluster, GroupMetricHourly.hour_t >= start - HOUR
        )
    )
    if lo is None and hourly is None:
        newest = conn.scalar(select(func.max(Snapshot.t)).where(Snapshot.cluster == cluster))
        where = "none at all" if newest is None else f"the newest is from {_utc(newest)}"
        raise NotFound(
            f"no snapshots of cluster {cluster!r} in this window ({where}): widen --since"
        )
    first = min(x for x in (lo, hourly) if x is not None)
    last = hi if hi is not None else float(hourly) + HOUR
    return float(first), float(last)


def _utc(t: float) -> str:
    return f"{datetime.fromtimestamp(t, UTC):%Y-%m-%d %H:%M} UTC"


def _stored(conn: Connection, cluster: str, a: float, b: float) -> Sums:
    out: Sums = {}
    if b <= a:
        return out
    s = StrandHourly
    rows = conn.execute(
        select(s.dimension, s.key, func.sum(s.spatial_gpu_s), func.sum(s.topology_gpu_s),
               func.sum(s.configuration_gpu_s))
        .where(s.cluster == cluster, s.dimension.in_(list(strand.DIMENSIONS)),
               s.hour_t >= a, s.hour_t < b)
        .group_by(s.dimension, s.key)
    )  # fmt: skip
    for name, key, *values in rows:
        out.setdefault(name, {})[strand.decode(key)] = [float(x or 0.0) for x in values]
    return out


def _stored_hours(conn: Connection, cluster: str, a: float, b: float) -> dict[float, list[float]]:
    """Hour -> stranded GPU-seconds [spatial, topology, configuration]."""
    if b <= a:
        return {}
    s = StrandHourly
    rows = conn.execute(
        select(s.hour_t, func.sum(s.spatial_gpu_s), func.sum(s.topology_gpu_s),
               func.sum(s.configuration_gpu_s))
        .where(s.cluster == cluster, s.dimension == _EVERY, s.hour_t >= a, s.hour_t < b)
        .group_by(s.hour_t)
    )  # fmt: skip
    return {float(h): [float(x or 0.0) for x in v] for h, *v in rows}


def _hour_keys(
    conn: Connection, cluster: str, hours: list[float], live: strand.Projected
) -> dict[float, dict[tuple[Any, ...], list[float]]]:
    """The headline charges of a few hours (the worst hours' top contributor)."""
    out: dict[float, dict[tuple[Any, ...], list[float]]] = defaultdict(dict)
    if hours:
        s = StrandHourly
        for hour, key, *values in conn.execute(
            select(s.hour_t, s.key, s.spatial_gpu_s, s.topology_gpu_s, s.configuration_gpu_s)
            .where(s.cluster == cluster, s.dimension == "headline", s.hour_t.in_(hours))
        ):  # fmt: skip
            acc = out[float(hour)].setdefault(strand.decode(key), [0.0, 0.0, 0.0])
            _add(acc, [float(v or 0.0) for v in values])
    wanted = set(hours)
    for (hour, name, parts), values in live.items():
        if name == "headline" and hour in wanted:
            _add(out[hour].setdefault(parts, [0.0, 0.0, 0.0]), values)
    return out


# -- naming and reading ----------------------------------------------------------------------

_TOPOLOGY_WORDS = (
    ("nvswitch-", "NVSwitch"),
    ("nvlink-pairs-", "NVLink-pair"),
    ("dgx1-", "DGX-1 cube-mesh"),
    ("pcie-", "PCIe"),
)


def topology_words(name: str) -> str:
    for prefix, words in _TOPOLOGY_WORDS:
        if name.startswith(prefix):
            return words
    if name.endswith("-all"):
        return "NVLink all-to-all"
    return "unknown-topology" if name == "unknown" else name


def type_name(gpus: int, model: str, topology: str) -> str:
    """``8-GPU h100 NVSwitch``."""
    return f"{gpus}-GPU {model} {topology_words(topology)}"


def _shape_words(per_node: int, nodes: int) -> str:
    return f"{per_node}-GPU" if nodes == 1 else f"{nodes}x{per_node}-GPU"


_LIFECYCLE_WORDS = {
    "<=1h": "of 1 h or less",
    "1-4h": "of 1 to 4 h",
    "4-24h": "of 4 to 24 h",
    "1-3d": "of 1 to 3 days",
    ">3d": "over 3 days",
    "unlimited": "without a time limit",
}


def _pct(x: float) -> str:
    return f"{x * 100:.0f} %"


def _headline_name(g: tuple[Any, ...]) -> str:
    owner, account, per_node, nodes, node_gpus, model, topology = g
    where = f"{type_name(node_gpus, model, topology)} nodes"
    if owner == CONFIGURATION:
        return f"{where} no pending job could use (configuration)"
    if owner == IDLE_NODE:
        return f"idle {where}"
    if owner:
        return f"{owner} on {where}"
    return f"{_shape_words(per_node, nodes)} jobs of account {account or '(none)'} on {where}"


def _owned(text: Callable[[tuple[Any, ...]], str]) -> Callable[[tuple[Any, ...]], str]:
    """A charge without a job is named by its owner (first in the key), a job's by ``text``
    of the rest of the key."""
    return lambda g: g[0] if g[0] else text(g[1:])


# dimension -> (the key's field names, how a key is named)
_VIEWS: dict[str, tuple[tuple[str, ...], Callable[[tuple[Any, ...]], str]]] = {
    "headline": (("owner", "account", "gpus_per_node", "nodes", "node_gpus", "gpu_model",
                  "topology"), _headline_name),
    "lifecycle": (("owner", "lifecycle"),
                  _owned(lambda g: f"time limit {_LIFECYCLE_WORDS.get(g[0], g[0])}")),
    "shape": (("owner", "gpus_per_node", "nodes"),
              _owned(lambda g: f"{_shape_words(*g)} jobs")),
    "policy": (("owner", "partition", "qos"),
               _owned(lambda g: f"partition {g[0] or '(none)'}"
                      + (f", QOS {g[1]}" if g[1] else ""))),
    "node_type": (("node_gpus", "gpu_model", "topology"), lambda g: f"{type_name(*g)} nodes"),
    "account": (("owner", "account"), _owned(lambda g: f"account {g[0] or '(none)'}")),
    "user": (("user",), lambda g: str(g[0])),
}  # fmt: skip


def _group(
    sums: dict[tuple[Any, ...], list[float]], dimension: str, total_s: float, top: int | None
) -> list[Contributor]:
    fields, name = _VIEWS[dimension]
    ranked = sorted(sums.items(), key=lambda kv: (-sum(kv[1]), str(kv[0])))
    if top is not None:
        ranked = ranked[:top]
    return [
        Contributor(
            name=name(g), key=dict(zip(fields, g, strict=True)), gpu_hours=sum(v) / HOUR,
            share=sum(v) / total_s if total_s else 0.0, spatial=v[0] / HOUR,
            topology=v[1] / HOUR, configuration=v[2] / HOUR,
        )
        for g, v in ranked
    ]  # fmt: skip


def _assemble(
    cluster: str,
    a: float,
    end: float,
    hours: float,
    total_s: float,
    sums: Sums,
    worst_hours: list[tuple[float, float]],
    worst_keys: dict[float, dict[tuple[Any, ...], list[float]]],
    top: int,
    swept_hours: float,
    hourly: list[HourPoint],
) -> Causes:
    every = sums.get(_EVERY, {})
    by_cause = {c: sum(v[i] for v in every.values()) / HOUR for i, c in enumerate(CAUSES)}

    def view(dimension: str) -> list[Contributor]:
        return _group(sums.get(dimension, {}), dimension, total_s, top)

    headline = view("headline")
    life, gran, policy, topo = view("lifecycle"), view("shape"), view("policy"), view("node_type")
    dimensions = [
        Dimension("lifecycles", "Job lifecycles: time limits of the jobs holding the nodes",
                  _reading_life(life), life),
        Dimension("granularity", "Request granularity: what those jobs asked for",
                  _reading_share(gran, "of stranded GPU-hours"), gran),
        Dimension("policy", "Scheduling policy: partitions and QOS, spatial stranding",
                  _reading_policy(policy, by_cause, total_s), policy),
        Dimension("topology", "Topology constraints: node types",
                  _reading_topology(topo, by_cause, total_s), topo),
    ]  # fmt: skip
    accounts, users = view("account"), view("user")
    worst = []
    for hour, gpu_s in worst_hours:
        best = _group(worst_keys.get(hour, {}), "headline", gpu_s, 1)
        worst.append(WorstHour(
            start=datetime.fromtimestamp(hour, UTC), stranded_gpus=gpu_s / HOUR,
            top=best[0].name if best else "", top_share=best[0].share if best else 0.0,
        ))  # fmt: skip
    notes = []
    if swept_hours > 0.01:
        notes.append(f"{swept_hours:.1f} h not stored as hours yet were computed from the "
                     "intervals for this report")  # fmt: skip
    return Causes(
        cluster=cluster, since=datetime.fromtimestamp(a, UTC),
        until=datetime.fromtimestamp(end, UTC), hours=hours, stranded_gpu_hours=total_s / HOUR,
        by_cause=by_cause, reading=_reading_headline(headline), headline=headline,
        dimensions=dimensions, accounts=accounts, users=users, worst=worst, hourly=hourly,
        swept_hours=swept_hours, notes=notes,
    )  # fmt: skip


def _jobs(rows: list[Contributor]) -> list[Contributor]:
    """The rows that are jobs (readings speak of what jobs do; the tables show all)."""
    return [r for r in rows if r.gpu_hours and not r.key.get("owner")]


def _reading_headline(rows: list[Contributor]) -> str:
    if not rows or not rows[0].gpu_hours:
        return _NOTHING
    return f"{rows[0].name}: {_pct(rows[0].share)} of stranded GPU-hours"


_NOTHING = "no GPU was stranded in this window"
_NO_JOBS = "no job held a node with stranded GPUs"


def _reading_share(rows: list[Contributor], what: str) -> str:
    if not rows or not rows[0].gpu_hours:
        return _NOTHING
    jobs = _jobs(rows)
    return f"{jobs[0].name}: {_pct(jobs[0].share)} {what}" if jobs else _NO_JOBS


def _reading_life(rows: list[Contributor]) -> str:
    if not rows or not rows[0].gpu_hours:
        return _NOTHING
    jobs = _jobs(rows)
    if not jobs:
        return _NO_JOBS
    r = jobs[0]
    name = f"jobs with a {r.name}" if r.name.startswith("time limit") else r.name
    if r.key.get("lifecycle") in (">3d", "1-3d"):
        return (
            f"{name}: {_pct(r.share)} of stranded GPU-hours (long jobs pin the nodes they fragment)"
        )
    return f"{name}: {_pct(r.share)} of stranded GPU-hours"


def _reading_policy(rows: list[Contributor], by_cause: dict[str, float], total_s: float) -> str:
    if not total_s:
        return _NOTHING
    spatial = by_cause["spatial"] * HOUR / total_s
    jobs = _jobs(rows)
    lead = f"{jobs[0].name}: {_pct(jobs[0].share)}; " if jobs else ""
    return (
        f"{lead}{_pct(spatial)} of the stranding is spatial (free GPUs scattered by "
        "placement: packing and defragmentation address it)"
    )


def _reading_topology(rows: list[Contributor], by_cause: dict[str, float], total_s: float) -> str:
    if not rows or not total_s:
        return _NOTHING
    r = rows[0]
    parts = [f"{c} {_pct(getattr(r, c) / r.gpu_hours)}" for c in CAUSES if getattr(r, c) > 0]
    return f"{r.name}: {_pct(r.share)} of stranded GPU-hours ({', '.join(parts)})"
