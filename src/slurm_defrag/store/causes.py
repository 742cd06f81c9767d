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
from slurm_defrag.store.errors import NotFound
from slurm_defrag.store.models import GroupMetricHourly, Snapshot, StrandHourly
from slurm_defrag.store.strand import (
    CONFIGURATION,
    IDLE_NODE,
    NOT_RECORDED,
    UNKNOWN_OWNER,
    StrandKey,
)

HOUR = 3600.0
CAUSES = ("spatial", "topology", "configuration")
NO_JOB = frozenset({CONFIGURATION, IDLE_NODE, UNKNOWN_OWNER, NOT_RECORDED})


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


_Sums = dict[StrandKey, list[float]]


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
        live: strand.Charges = {}
        if end > stored_until:
            live = strand.sweep(conn, cluster, stored_until, end, strand.node_types(conn, cluster))
        for (hour, key), values in live.items():
            for acc in (sums.setdefault(key, [0.0, 0.0, 0.0]),
                        per_hour.setdefault(hour, [0.0, 0.0, 0.0])):  # fmt: skip
                for i, v in enumerate(values):
                    acc[i] += v
        totals = {h: sum(v) for h, v in per_hour.items()}
        worst_hours = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:worst]
        worst_keys = _hour_keys(conn, cluster, [h for h, _ in worst_hours], live)
    total_s = sum(sum(v) for v in sums.values())
    hours = max(0.0, end - a) / HOUR
    hourly = [
        HourPoint(datetime.fromtimestamp(h, UTC), *(x / HOUR for x in v))
        for h, v in sorted(per_hour.items())
    ]
    return _assemble(cluster, a, end, hours, total_s, sums, worst_hours, worst_keys, top,
                     (end - stored_until) / HOUR, hourly)  # fmt: skip


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


_KEY_COLUMNS = tuple(getattr(StrandHourly, f) for f in StrandKey._fields)


def _stored(conn: Connection, cluster: str, a: float, b: float) -> _Sums:
    if b <= a:
        return {}
    s = StrandHourly
    rows = conn.execute(
        select(*_KEY_COLUMNS, func.sum(s.spatial_gpu_s), func.sum(s.topology_gpu_s),
               func.sum(s.configuration_gpu_s))
        .where(s.cluster == cluster, s.hour_t >= a, s.hour_t < b)
        .group_by(*_KEY_COLUMNS)
    )  # fmt: skip
    n = len(StrandKey._fields)
    return {StrandKey(*row[:n]): [float(x or 0.0) for x in row[n:]] for row in rows}


def _stored_hours(conn: Connection, cluster: str, a: float, b: float) -> dict[float, list[float]]:
    """Hour -> stranded GPU-seconds [spatial, topology, configuration]."""
    if b <= a:
        return {}
    s = StrandHourly
    rows = conn.execute(
        select(s.hour_t, func.sum(s.spatial_gpu_s), func.sum(s.topology_gpu_s),
               func.sum(s.configuration_gpu_s))
        .where(s.cluster == cluster, s.hour_t >= a, s.hour_t < b)
        .group_by(s.hour_t)
    )  # fmt: skip
    return {float(h): [float(x or 0.0) for x in v] for h, *v in rows}


def _hour_keys(
    conn: Connection, cluster: str, hours: list[float], live: strand.Charges
) -> dict[float, _Sums]:
    """The charges of a few hours, by key (for the worst hours' top contributor)."""
    out: dict[float, _Sums] = defaultdict(dict)
    if hours:
        s = StrandHourly
        n = len(StrandKey._fields)
        for row in conn.execute(
            select(s.hour_t, *_KEY_COLUMNS, s.spatial_gpu_s, s.topology_gpu_s,
                   s.configuration_gpu_s)
            .where(s.cluster == cluster, s.hour_t.in_(hours))
        ):  # fmt: skip
            acc = out[float(row[0])].setdefault(StrandKey(*row[1 : n + 1]), [0.0, 0.0, 0.0])
            for i, v in enumerate(row[n + 1 :]):
                acc[i] += float(v or 0.0)
    wanted = set(hours)
    for (hour, key), values in live.items():
        if hour in wanted:
            acc = out[hour].setdefault(key, [0.0, 0.0, 0.0])
            for i, v in enumerate(values):
                acc[i] += v
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


def node_type(k: StrandKey) -> str:
    return type_name(k.node_gpus, k.gpu_model, k.topology)


def shape(k: StrandKey) -> str:
    if k.user in NO_JOB or not k.gpus_per_node:
        return k.user
    return f"{k.gpus_per_node}-GPU" if k.nodes == 1 else f"{k.nodes}x{k.gpus_per_node}-GPU"


_LIFECYCLE_WORDS = {
    "<=1h": "of 1 h or less",
    "1-4h": "of 1 to 4 h",
    "4-24h": "of 4 to 24 h",
    "1-3d": "of 1 to 3 days",
    ">3d": "over 3 days",
    "unlimited": "without a time limit",
}


def _policy_name(g: tuple[Any, ...]) -> str:
    return f"partition {g[0] or '(none)'}" + (f", QOS {g[1]}" if g[1] else "")


def _pct(x: float) -> str:
    return f"{x * 100:.0f} %"


_HEADLINE_FIELDS = ("owner", "account", "gpus_per_node", "nodes", "node_gpus", "gpu_model",
                    "topology")  # fmt: skip


def _headline_of(k: StrandKey) -> tuple[Any, ...]:
    """What the headline groups by: the account and request shape of the jobs, the type of
    the nodes (``owner`` names a charge without a job)."""
    owner = k.user if k.user in NO_JOB else ""
    return (owner, k.account, k.gpus_per_node, k.nodes, k.node_gpus, k.gpu_model, k.topology)


def _headline_name(g: tuple[Any, ...]) -> str:
    owner, account, per_node, nodes, node_gpus, model, topology = g
    where = f"{type_name(node_gpus, model, topology)} nodes"
    if owner == CONFIGURATION:
        return f"{where} no pending job could use (configuration)"
    if owner == IDLE_NODE:
        return f"idle {where}"
    if owner:
        return f"{owner} on {where}"
    size = f"{per_node}-GPU" if nodes == 1 else f"{nodes}x{per_node}-GPU"
    return f"{size} jobs of account {account or '(none)'} on {where}"


# Each view: (key, title, grouping of a StrandKey, name of a group, what its values are)
_Group = Callable[[StrandKey], tuple[Any, ...]]


def _group(sums: _Sums, by: _Group, total_s: float, name: Callable[[tuple[Any, ...]], str],
           fields: tuple[str, ...], top: int | None) -> list[Contributor]:  # fmt: skip
    acc: dict[tuple[Any, ...], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for key, values in sums.items():
        row = acc[by(key)]
        for i, v in enumerate(values):
            row[i] += v
    ranked = sorted(acc.items(), key=lambda kv: (-sum(kv[1]), str(kv[0])))
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
    sums: _Sums,
    worst_hours: list[tuple[float, float]],
    worst_keys: dict[float, _Sums],
    top: int,
    swept_hours: float,
    hourly: list[HourPoint],
) -> Causes:
    by_cause = {c: sum(v[i] for v in sums.values()) / HOUR for i, c in enumerate(CAUSES)}

    def jobs_only(g: _Group, width: int) -> _Group:
        # Views of the jobs' own attributes: the no-job charges keep their own name.
        return lambda k: (k.user, *[""] * (width - 1)) if k.user in NO_JOB else g(k)

    def named(text: Callable[[tuple[Any, ...]], str]) -> Callable[[tuple[Any, ...]], str]:
        return lambda g: g[0] if g[0] in NO_JOB else text(g)

    headline = _group(sums, _headline_of, total_s, _headline_name, _HEADLINE_FIELDS, top)
    life = _group(sums, jobs_only(lambda k: (k.lifecycle,), 1), total_s,
                  named(lambda g: f"time limit {_LIFECYCLE_WORDS.get(g[0], g[0])}"),
                  ("lifecycle",), top)  # fmt: skip
    gran = _group(sums, jobs_only(lambda k: (shape(k),), 1), total_s,
                  named(lambda g: f"{g[0]} jobs"), ("shape",), top)  # fmt: skip
    policy = _group(sums, jobs_only(lambda k: (k.partition, k.qos), 2), total_s,
                    named(_policy_name),
                    ("partition", "qos"), top)  # fmt: skip
    topo = _group(sums, lambda k: (k.node_gpus, k.gpu_model, k.topology), total_s,
                  lambda g: f"{type_name(*g)} nodes", ("node_gpus", "gpu_model", "topology"),
                  top)  # fmt: skip
    accounts = _group(sums, jobs_only(lambda k: (k.account,), 1), total_s,
                      named(lambda g: f"account {g[0] or '(none)'}"), ("account",),
                      top)  # fmt: skip
    users = _group(sums, lambda k: (k.user,), total_s, lambda g: g[0], ("user",), top)
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
    worst = []
    for hour, gpu_s in worst_hours:
        best = _group(worst_keys.get(hour, {}), _headline_of, gpu_s, _headline_name,
                      _HEADLINE_FIELDS, 1)  # fmt: skip
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
    return [r for r in rows if r.gpu_hours and next(iter(r.key.values()), "") not in NO_JOB]


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
