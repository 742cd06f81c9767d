"""Turning a snapshot into stored parts and back, exactly.

Pure functions, no database: bodies are the domain models' own JSON (so a stored node or
job validates through the same model on the way back), the rarely-changing snapshot-level
parts are hashed for content addressing, and ``taken_at`` keeps its original UTC offset.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta, timezone
from functools import lru_cache
from itertools import pairwise
from typing import Any

from slurm_defrag.domain.cluster import ClusterSnapshot, Node
from slurm_defrag.metrics.report import FragReport, NodeMetrics

_CONFIG_FIELDS = ("topologies", "reservations", "partitions", "nvlink_domains", "left_out")
"""Snapshot-level parts, stored once per distinct value. ``left_out`` (job records a read
could not identify) is left out of the body when empty, so earlier bodies keep their hash."""
_DIGITS = re.compile(r"(\d+)")

MetricKey = tuple[str, bool, int, float, int, int, int, int, float, int]
"""The stored per-node figures; an interval continues while this tuple is unchanged."""


@lru_cache(maxsize=1 << 16)  # the same node names and job ids recur every snapshot
def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """``gpu9 < gpu10``, ``123 < 123_4 < 1000``: the order Slurm tools list things in."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in _DIGITS.split(name) if part
    )


def order_exception(names: Sequence[str]) -> list[str] | None:
    """None when ``names`` are in natural order (nothing to store), else the order itself."""
    keys = [natural_key(n) for n in names]
    in_order = all(a <= b for a, b in pairwise(keys))
    return None if in_order else list(names)


def restore_order(
    bodies: dict[str, dict[str, Any]], order: list[str] | None
) -> list[dict[str, Any]]:
    names = order if order is not None else sorted(bodies, key=natural_key)
    return [bodies[n] for n in names]


def config_body(snapshot: ClusterSnapshot) -> tuple[str, str]:
    """(hash, JSON) of the snapshot-level parts; equal parts give equal hashes."""
    data = snapshot.model_dump(mode="json", include=set(_CONFIG_FIELDS))
    body = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest(), body


def node_body(node: Node) -> str:
    return node.model_dump_json()


def epoch(dt: datetime) -> float:
    """Seconds since the epoch; a naive datetime is taken as UTC."""
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


def split_taken_at(dt: datetime) -> tuple[datetime, int | None]:
    """(UTC instant, original UTC offset in seconds or None if naive)."""
    if dt.tzinfo is None:
        return dt.replace(tzinfo=UTC), None
    offset = dt.utcoffset()
    assert offset is not None
    return dt.astimezone(UTC), int(offset.total_seconds())


def join_taken_at(utc: datetime, offset_s: int | None) -> datetime:
    # None: a naive taken_at stored before snapshots required a time zone; it was stored
    # as UTC (split_taken_at), so it comes back as UTC rather than failing validation.
    if offset_s is None:
        return utc.astimezone(UTC)
    return utc.astimezone(timezone(timedelta(seconds=offset_s)))


def metric_keys(nodes: Iterable[NodeMetrics]) -> dict[str, MetricKey]:
    """node -> stored figures, for every node of a report.

    The metrics pass gives every node of one class the *same* counts and partitions
    objects, so each is converted once per call (keyed by identity, valid while
    ``nodes`` is alive) rather than once per node.
    """
    counts: dict[int, tuple[int, float, int, int, int, int, float]] = {}
    parts: dict[tuple[str, ...], str] = {}
    out: dict[str, MetricKey] = {}
    for m in nodes:
        c = m.counts
        k = counts.get(id(c))
        if k is None:
            u = c.unusable
            k = counts[id(c)] = (c.free, c.free_memory_gb, u.total, u.spatial, u.topology,
                                 u.configuration, c.unusable_memory_gb)  # fmt: skip
        p = parts.get(m.partitions)
        if p is None:
            p = parts[m.partitions] = "," + ",".join(m.partitions) + ","
        out[m.node] = (p, m.available, *k, m.largest_free_block)
    return out


METRIC_COLUMNS = (
    "partitions",
    "available",
    "free",
    "free_memory_gb",
    "unusable",
    "unusable_spatial",
    "unusable_topology",
    "unusable_configuration",
    "unusable_memory_gb",
    "largest_free_block",
)


def group_rows(report: FragReport, snapshot_id: int, t: float) -> list[dict[str, Any]]:
    """One row per scope (cluster, each partition, each GPU model) with pending counts."""
    groups = [("cluster", report.cluster_metrics)]
    groups += [("partition", g) for g in report.partitions]
    groups += [("model", g) for g in report.models]
    rows = []
    for scope, g in groups:
        if scope == "cluster":
            pending = list(report.pending)
        elif scope == "partition":
            pending = [p for p in report.pending if p.partition == g.name]
        else:
            pending = [p for p in report.pending if p.gpu_model == g.name]
        c = g.counts
        starved = [p for p in pending if p.status == "falsely-starved"]
        rows.append(
            {
                "snapshot_id": snapshot_id,
                "scope": scope,
                "name": g.name,
                "cluster": report.cluster,
                "t": t,
                "nodes": g.nodes,
                "gpus": c.gpus,
                "used": c.used,
                "free": c.free,
                "free_unavailable": c.free_unavailable,
                "free_memory_gb": c.free_memory_gb,
                "unusable": c.unusable.total,
                "unusable_memory_gb": c.unusable_memory_gb,
                "fgd": c.fgd,
                "largest_free_block": g.largest_free_block,
                "pending": len(pending),
                "falsely_starved": len(starved),
                "short": sum(p.status == "short" for p in pending),
                "unusable_spatial": c.unusable.spatial,
                "unusable_topology": c.unusable.topology,
                "unusable_configuration": c.unusable.configuration,
                "falsely_starved_gpus": sum(p.gpus for p in starved),
            }
        )
    return rows
