"""Stranded GPU-hours and what strands them, per hour: the data of ``report causes``.

A node's *stranded* GPUs at an instant are its ``unusable`` ones (docs/metrics.md): free
GPUs of an available node that no pending job's shape could use, split by cause (spatial,
topology, configuration), exactly as the metrics pass stores them per node. They are
charged to what occupies the node:

* over a stretch of time where a node strands U GPUs by spatial or topology causes and O
  of its GPUs are occupied, each occupied GPU is charged U / O x the stretch's length: the
  jobs holding a node whose free GPUs nobody can use are what fragments it, in proportion
  to what they hold;
* GPUs stranded by *configuration* (no pending job can ever use the node: its GPU model,
  partition or size) are charged to ``(configuration)`` whoever runs there: the jobs on
  such a node do not strand its other GPUs, the mismatch between the node and the queue
  does (the node type says which);
* a node that strands GPUs with nothing running on it is charged to ``(idle node)``
  (an NVLink topology that can never form the block a job waits for); GPUs the node
  reports busy without a visible job to ``(unknown owner)``; a job whose start no
  ``job_runs`` row records to ``(job not recorded)``.

The charges of an hour add up to the stranded GPU-seconds of that hour, whatever the
owners. Each charge carries the occupant's account, user, partition, QOS, request shape
(GPUs per node, nodes), time-limit class (:data:`LIFECYCLES`) and the node's type (GPU
count, model, topology): the dimensions the report groups by.

:func:`sweep` computes the charges of any stretch from the stored intervals (node metrics,
GPU allocations, job runs). The snapshot writer runs it for every hour that completes
(:func:`fill_hours`) and stores the result in ``strand_hourly``, so a report over a month
sums small rows instead of joining a month of intervals; a report computes the hours not
stored yet (the current one) with the same :func:`sweep`.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import Connection, and_, func, insert, select, union_all, update
from sqlalchemy.orm import aliased

from slurm_defrag.domain.cluster import LIVE_SOURCES, ClusterSnapshot
from slurm_defrag.store.models import (
    GpuAllocation,
    JobRun,
    NodeMetric,
    NodeRef,
    NodeState,
    Snapshot,
    StrandHourly,
    StrandProgress,
)

HOUR = 3600.0

CONFIGURATION = "(configuration)"
IDLE_NODE = "(idle node)"
UNKNOWN_OWNER = "(unknown owner)"
NOT_RECORDED = "(job not recorded)"

LIFECYCLES: tuple[tuple[str, int], ...] = (
    ("<=1h", 3600),
    ("1-4h", 4 * 3600),
    ("4-24h", 86400),
    ("1-3d", 3 * 86400),
)
"""Time-limit classes (label, upper bound in seconds, inclusive); above: ``>3d``; no limit:
``unlimited``; no job: ``-``."""

MAX_HOURS_PER_SAVE = 24
"""Hours the writer fills per snapshot when it is behind (after an upgrade, a restart):
the rest waits for the next snapshots, so one save never takes minutes."""


def lifecycle(time_limit_s: int | None) -> str:
    if time_limit_s is None:
        return "unlimited"
    for label, bound in LIFECYCLES:
        if time_limit_s <= bound:
            return label
    return ">3d"


@dataclass(frozen=True)
class NodeType:
    gpus: int
    model: str
    topology: str


class StrandKey(NamedTuple):
    """What a charge is grouped by: the node's type and the occupant's job."""

    node_gpus: int
    gpu_model: str
    topology: str
    account: str
    user: str
    partition: str
    qos: str
    gpus_per_node: int
    nodes: int
    lifecycle: str


_NO_JOB = {
    owner: ("", owner, "", "", 0, 0, "-")
    for owner in (CONFIGURATION, IDLE_NODE, UNKNOWN_OWNER, NOT_RECORDED)
}
"""The job part of a key for charges without a job."""

Charges = dict[tuple[float, StrandKey], list[float]]
"""(hour, key) -> GPU-seconds stranded [spatial, topology, configuration]."""

NO_JOB_OWNERS = frozenset(_NO_JOB)


def _owner(k: StrandKey) -> str:
    """The charge's owner when it is not a job (``(configuration)``, ...), else ``""``."""
    return k.user if k.user in NO_JOB_OWNERS else ""


DIMENSIONS: dict[str, Callable[[StrandKey], tuple[Any, ...]]] = {
    "headline": lambda k: (_owner(k), k.account, k.gpus_per_node, k.nodes, k.node_gpus,
                           k.gpu_model, k.topology),
    "lifecycle": lambda k: (_owner(k), k.lifecycle),
    "shape": lambda k: (_owner(k), k.gpus_per_node, k.nodes),
    "policy": lambda k: (_owner(k), k.partition, k.qos),
    "node_type": lambda k: (k.node_gpus, k.gpu_model, k.topology),
    "account": lambda k: (_owner(k), k.account),
    "user": lambda k: (k.user,),
}  # fmt: skip
"""What is stored per hour: each charge once under every dimension, keyed by what that
dimension groups (a job's attributes are blank, and ``owner`` names the charge, when no job
held the GPUs). Storing dimensions apart keeps an hour's rows to the sum of their sizes
(a few hundred), not their product (users x accounts x shapes x limits x node types)."""

Projected = dict[tuple[float, str, tuple[Any, ...]], list[float]]
"""(hour, dimension, key) -> GPU-seconds [spatial, topology, configuration]."""


def project(charges: Charges) -> Projected:
    out: Projected = defaultdict(lambda: [0.0, 0.0, 0.0])
    for (hour, key), values in charges.items():
        for name, of in DIMENSIONS.items():
            acc = out[(hour, name, of(key))]
            for i, v in enumerate(values):
                acc[i] += v
    return out


def encode(key: tuple[Any, ...]) -> str:
    return json.dumps(key, separators=(",", ":"), ensure_ascii=False)


def decode(text: str) -> tuple[Any, ...]:
    return tuple(json.loads(text))


def _topology_name(topology: str | None, gpus: int, source: str) -> str:
    if topology is not None:
        return topology
    if gpus > 1 and source in LIVE_SOURCES:
        return "unknown"
    return f"pcie-1x{gpus}" if gpus else "-"


def node_types_of(snapshot: ClusterSnapshot, node_ids: Mapping[str, int]) -> dict[int, NodeType]:
    """Node id -> type, from a snapshot in memory (the writer's)."""
    return {
        node_ids[n.name]: NodeType(
            n.gpu_count,
            n.gpu_model or "?",
            _topology_name(n.topology, n.gpu_count, snapshot.source),
        )
        for n in snapshot.nodes
        if n.name in node_ids
    }


def node_types(conn: Connection, cluster: str) -> dict[int, NodeType]:
    """Node id -> type, from each node's newest stored version (a report's)."""
    newest = (
        select(func.max(NodeState.id))
        .join(NodeRef, NodeRef.id == NodeState.node_id)
        .where(NodeRef.cluster == cluster)
        .group_by(NodeState.node_id)
    )
    source = conn.scalar(
        select(Snapshot.source).where(Snapshot.cluster == cluster).order_by(Snapshot.id.desc())
    )
    out = {}
    for node_id, body in conn.execute(
        select(NodeState.node_id, NodeState.body).where(NodeState.id.in_(newest))
    ):
        data = json.loads(body)
        gpus = int(data.get("gpu_count") or 0)
        out[node_id] = NodeType(
            gpus, str(data.get("gpu_model") or "?"),
            _topology_name(data.get("topology"), gpus, source or "file"),
        )  # fmt: skip
    return out


class _Alloc(NamedTuple):
    start: float
    end: float
    key: tuple[str, str, str, str, int, int, str]
    """(account, user, partition, qos, GPUs per node, nodes, lifecycle) of the job."""


def sweep(
    conn: Connection, cluster: str, a: float, b: float, types: Mapping[int, NodeType]
) -> Charges:
    """The charges of ``[a, b)`` (see the module docstring), split at whole hours."""
    charges: Charges = defaultdict(lambda: [0.0, 0.0, 0.0])
    if b <= a:
        return charges
    pieces = _metric_pieces(conn, cluster, a, b)
    if not pieces:
        return charges
    allocs = _allocations(conn, cluster, a, b, set(pieces))
    for node_id, node_pieces in pieces.items():
        kind = types.get(node_id)
        if kind is None:
            continue
        _charge_node(charges, kind, node_pieces, sorted(allocs.get(node_id, ())))
    return charges


def _metric_pieces(
    conn: Connection, cluster: str, a: float, b: float
) -> dict[int, list[tuple[float, float, int, int, int, int]]]:
    """Per node: (start, end, spatial, topology, configuration, free) of its intervals
    with stranded GPUs, clipped to ``[a, b)``, in time order."""
    m = NodeMetric
    cols = (m.node_id, m.from_t, m.to_t, m.unusable_spatial, m.unusable_topology,
            m.unusable_configuration, m.free)  # fmt: skip
    rows = conn.execute(_still_open_or_after(select(*cols).where(m.unusable > 0, m.from_t < b),
                                             m.to_t, a))  # fmt: skip
    ours = _nodes_of(conn, cluster)
    out: dict[int, list[tuple[float, float, int, int, int, int]]] = defaultdict(list)
    for node_id, f, t, sp, tp, cf, free in sorted(rows, key=lambda r: (r[0], r[1])):
        lo, hi = max(f, a), min(b if t is None else t, b)
        if hi > lo and node_id in ours:
            out[node_id].append((lo, hi, sp, tp, cf, free))
    return out


def _nodes_of(conn: Connection, cluster: str) -> set[int]:
    return set(conn.scalars(select(NodeRef.id).where(NodeRef.cluster == cluster)))


def _still_open_or_after(query: Any, end: Any, after: float | None) -> Any:
    """``query`` of the intervals whose ``end`` is NULL (open) or later than ``after``, as
    two indexed selects (``UNION ALL``): with an ``OR``, or joined to the cluster's nodes,
    a database walks every interval ever stored of each node (a month: 0.6 s an hour)."""
    if after is None:
        return query
    return union_all(query.where(end.is_(None)), query.where(end > after))


def _allocations(
    conn: Connection, cluster: str, a: float, b: float, nodes: set[int]
) -> dict[int, list[_Alloc]]:
    """Per node: the GPUs held during ``[a, b)``, one entry per GPU and stretch, with the
    holding job's attributes (from its first recorded run)."""
    # Snapshot ids bound the query: an allocation counts if it is valid at the last
    # snapshot before a or at any snapshot up to b.
    before = conn.scalar(
        select(func.max(Snapshot.id)).where(Snapshot.cluster == cluster, Snapshot.t < a)
    )
    upto = conn.scalar(
        select(func.min(Snapshot.id)).where(Snapshot.cluster == cluster, Snapshot.t >= b)
    )
    al = GpuAllocation
    first, last = aliased(Snapshot), aliased(Snapshot)
    q = (
        select(al.node_id, first.t, last.t, JobRun.account, JobRun.user, JobRun.partition,
               JobRun.qos, JobRun.gpus_per_node, JobRun.nodes, JobRun.time_limit_s,
               JobRun.id)
        .outerjoin(first, first.id == al.from_snapshot)
        .outerjoin(last, last.id == al.to_snapshot)
        .outerjoin(JobRun, and_(JobRun.job_ref == al.job_ref, JobRun.run == 0))
    )  # fmt: skip
    if upto is not None:
        q = q.where(al.from_snapshot < upto)
    out: dict[int, list[_Alloc]] = defaultdict(list)
    rows = conn.execute(_still_open_or_after(q, al.to_snapshot, before))
    for node_id, f, t, account, user, part, qos, per_node, n_nodes, limit, run in rows:
        if node_id not in nodes:
            continue
        lo, hi = max(a if f is None else f, a), min(b if t is None else t, b)
        if hi <= lo:
            continue
        if run is None:
            key = _NO_JOB[NOT_RECORDED]
        else:
            key = (account, user, part, qos, per_node, n_nodes, lifecycle(limit))
        out[node_id].append(_Alloc(lo, hi, key))
    return out


def _charge_node(
    charges: Charges,
    kind: NodeType,
    pieces: list[tuple[float, float, int, int, int, int]],
    allocs: list[_Alloc],
) -> None:
    """Charge each stretch of ``pieces`` to the allocations overlapping it.

    Both lists are in time order; ``active`` holds the allocations that started before the
    current piece ends and may still overlap it (a node holds a few dozen at most).
    """
    active: list[_Alloc] = []
    nxt = 0
    for start, end, sp, tp, cf, free in pieces:
        while nxt < len(allocs) and allocs[nxt].start < end:
            active.append(allocs[nxt])
            nxt += 1
        active = [x for x in active if x.end > start]
        occupied = kind.gpus - free
        for h_start, h_end in _hour_pieces(start, end):
            length = h_end - h_start
            hour = math.floor(h_start / HOUR) * HOUR
            if cf:
                _add(charges, hour, kind, _NO_JOB[CONFIGURATION], 0, 0, cf, length)
            if not (sp or tp):
                continue
            if occupied <= 0:
                _add(charges, hour, kind, _NO_JOB[IDLE_NODE], sp, tp, 0, length)
                continue
            held = 0.0
            for x in active:
                overlap = min(x.end, h_end) - max(x.start, h_start)
                if overlap > 0:
                    held += overlap
                    _add(charges, hour, kind, x.key, sp, tp, 0, overlap / occupied)
            unknown = occupied * length - held
            if unknown > 1e-9:
                _add(charges, hour, kind, _NO_JOB[UNKNOWN_OWNER], sp, tp, 0, unknown / occupied)


def _add(
    charges: Charges,
    hour: float,
    kind: NodeType,
    job: tuple[str, str, str, str, int, int, str],
    sp: int,
    tp: int,
    cf: int,
    seconds: float,
) -> None:
    acc = charges[(hour, StrandKey(kind.gpus, kind.model, kind.topology, *job))]
    acc[0] += sp * seconds
    acc[1] += tp * seconds
    acc[2] += cf * seconds


def _hour_pieces(a: float, b: float) -> Iterable[tuple[float, float]]:
    while a < b:
        stop = min(b, math.floor(a / HOUR) * HOUR + HOUR)
        yield a, stop
        a = stop


def rows(cluster: str, charges: Charges) -> list[dict[str, Any]]:
    """``strand_hourly`` rows of ``charges``: one per hour, dimension and key."""
    return [
        {"cluster": cluster, "hour_t": hour, "dimension": name, "key": encode(key),
         "spatial_gpu_s": sp, "topology_gpu_s": tp, "configuration_gpu_s": cf}
        for (hour, name, key), (sp, tp, cf) in project(charges).items()
    ]  # fmt: skip


def progress(conn: Connection, cluster: str) -> float | None:
    """Every hour before this time is stored (None: none yet)."""
    value = conn.scalar(select(StrandProgress.until_t).where(StrandProgress.cluster == cluster))
    return None if value is None else float(value)


def fill_hours(
    conn: Connection, cluster: str, now_t: float, types: Mapping[int, NodeType]
) -> float:
    """Store the charges of the hours complete at ``now_t`` not stored yet (at most
    :data:`MAX_HOURS_PER_SAVE`); returns the new progress mark."""
    done = progress(conn, cluster)
    start = done
    if start is None:
        first = conn.scalar(select(func.min(Snapshot.t)).where(Snapshot.cluster == cluster))
        start = math.floor((now_t if first is None else first) / HOUR) * HOUR
    until = min(math.floor(now_t / HOUR) * HOUR, start + MAX_HOURS_PER_SAVE * HOUR)
    if until <= start:
        if done is None:
            conn.execute(insert(StrandProgress).values(cluster=cluster, until_t=start))
        return start
    new = rows(cluster, sweep(conn, cluster, start, until, types))
    if new:
        conn.execute(insert(StrandHourly), new)
    if done is None:
        conn.execute(insert(StrandProgress).values(cluster=cluster, until_t=until))
    else:
        conn.execute(
            update(StrandProgress).where(StrandProgress.cluster == cluster).values(until_t=until)
        )
    return until
