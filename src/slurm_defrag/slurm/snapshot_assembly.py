"""Turn the parts a backend read into one validated :class:`ClusterSnapshot`.

The same rules for every backend, so that the cli, rest and pyslurm snapshots of one
cluster state are equal: topology from the sources of :mod:`.discovery.topology_sources`
(Slurm never reports NVLinks; each node records which source gave it), node reservations
from the active reservations (22.05 and pyslurm do not put them on the node), and a stable
order (nodes, partitions, reservations by name, jobs by id) so snapshots diff cleanly.

Job records a reader could not understand (:mod:`slurm_defrag.slurm.parse.records`) are said
here, one warning each per read, whatever the backend.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from pydantic import ValidationError

from slurm_defrag.config_files import read_text
from slurm_defrag.domain.cluster import (
    HOLDS_GPUS,
    ClusterSnapshot,
    Job,
    Node,
    NvlinkDomain,
    Partition,
    RecordPart,
    Reservation,
    record_reason,
)
from slurm_defrag.domain.topology import BUILTIN_TOPOLOGIES, GpuTopology
from slurm_defrag.domain.units import MILLI, share_milli
from slurm_defrag.errors import InputError
from slurm_defrag.slurm.connection import SlurmSettings
from slurm_defrag.slurm.discovery.topology_block import topology_conf_domains
from slurm_defrag.slurm.discovery.topology_sources import Found, GresConfText, resolve
from slurm_defrag.slurm.failures import SlurmParseError
from slurm_defrag.slurm.parse.mapping import natural_key, show
from slurm_defrag.snapshot_file import format_validation_error

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Parts:
    """What a backend read, before the shared rules are applied."""

    nodes: Sequence[Node]
    jobs: Sequence[Job]
    partitions: Sequence[Partition]
    reservations: Sequence[Reservation]
    cluster: str | None = None
    nvlink_domains: Sequence[NvlinkDomain] = ()
    """Multi-node NVLink domains (cli: topology/block blocks); nodes get theirs named."""
    left_out: Sequence[str] = ()
    """Job records the reader could not identify (:mod:`slurm_defrag.slurm.parse.records`)."""


def assemble(
    parts: Parts,
    *,
    source: str,
    taken_at: datetime,
    settings: SlurmSettings,
    where: str,
    gres_conf: GresConfText | None = None,
) -> ClusterSnapshot:
    """``gres_conf``: the gres.conf the backend found beside slurm.conf (cli only)."""
    topo_of = resolve(settings, gres_conf)
    reserved = {node: r.name for r in parts.reservations if r.state == "ACTIVE" for node in r.nodes}
    custom: dict[str, GpuTopology] = {}
    domains = tuple(parts.nvlink_domains)
    if settings.topology_conf is not None:
        path = settings.topology_conf
        domains = topology_conf_domains(read_text(path, "topology_conf"), str(path))
    domain_of = {n: d.name for d in domains for n in d.nodes}
    shard_milli = _shard_milli(parts)
    nodes = []
    for node in sorted(parts.nodes, key=lambda n: natural_key(n.name)):
        updates: dict[str, object] = {}
        found = _checked(node, topo_of.get(node.name))
        if found is not None:
            topo = found.topology
            if custom.get(topo.name, topo) != topo:
                # Graph-derived names are unique per graph; only a clash would get here.
                raise InputError(f"topology {topo.name!r}: two different matrices, one name")
            updates["topology"] = topo.name
            updates["topology_source"] = found.source
            if topo.name not in BUILTIN_TOPOLOGIES:
                custom[topo.name] = topo
        if node.reservation is None and node.name in reserved:
            updates["reservation"] = reserved[node.name]
        if node.nvlink_domain is None and node.name in domain_of:
            updates["nvlink_domain"] = domain_of[node.name]
        if node.name in shard_milli:
            updates["gpu_milli_used"] = shard_milli[node.name]
        nodes.append(_with(node, updates) if updates else node)
    jobs = placed(parts.jobs, {n.name: n for n in nodes}, where)
    warn_unreadable(jobs, parts.left_out, where)
    try:
        return ClusterSnapshot(
            cluster=settings.cluster_name or parts.cluster or "cluster",
            taken_at=taken_at,
            source=source,
            topologies=custom,
            nodes=tuple(nodes),
            jobs=tuple(sorted(jobs, key=lambda j: natural_key(j.id))),
            partitions=tuple(sorted(parts.partitions, key=lambda p: natural_key(p.name))),
            reservations=tuple(sorted(parts.reservations, key=lambda r: natural_key(r.name))),
            nvlink_domains=domains,
            left_out=tuple(parts.left_out),
        )
    except ValidationError as exc:
        raise SlurmParseError(format_validation_error(where, exc)) from None


def placed(jobs: Sequence[Job], nodes: Mapping[str, Node], where: str) -> list[Job]:
    """The jobs, with those holding GPUs on no such node, or on no such GPU, made unreadable.

    A record is checked against its own nodes (the snapshot refuses such a job), so one bad
    allocation costs that job only (issue #40). Its GPUs stay busy all the same: cli and
    rest nodes state their busy GPUs themselves (``GresUsed``), pyslurm's count every GPU of
    a node busy that a job claims past its last one (:func:`pyslurm_adapter.node`).
    """
    out = []
    for job in jobs:
        problem = _misplaced(job, nodes)
        out.append(job if problem is None else _unplaced(job, f"{where}: job {job.id}: {problem}"))
    return out


def _misplaced(job: Job, nodes: Mapping[str, Node]) -> str | None:
    for name, idx in sorted(job.gpus.items()):
        node = nodes.get(name)
        if node is None:
            return f"gpus: unknown node {show(name)}"
        if max(idx) >= node.gpu_count:
            return f"gpus.{show(name)}: GPU index {max(idx)} outside 0..{node.gpu_count - 1}"
    return None


def _unplaced(job: Job, detail: str) -> Job:
    """``job`` without its allocation (and, as an unreadable job, without its request)."""
    reason = job.unreadable or record_reason(RecordPart.GPU_ALLOCATION, detail)
    # Validated again, as _with() does for nodes: model_copy(update=...) would skip the
    # validators (``gpus`` would stay a plain, mutable dict).
    update: dict[str, object] = {"gpus": {}, "shard_use": (), "request": None}
    update["unreadable"] = reason
    return Job.model_validate({**job.model_dump(), **update})


def warn_unreadable(jobs: Sequence[Job], left_out: Sequence[str], where: str) -> None:
    """One warning per job record of this read that a reader could not understand.

    The reasons are already one escaped line each (:func:`record_reason`); job ids are
    Slurm's digits. The figures go to ``slurm_defrag_unreadable_jobs_total`` through the
    service's observer (:meth:`ClusterSnapshot.unreadable_parts`).
    """
    for job in jobs:
        if job.unreadable:
            log.warning(
                "%s: job %s cannot be read whole, it is out of planning (never requeued or "
                "planned for, its GPUs stay busy): %s",
                where,
                job.id,
                job.unreadable,
            )
    for reason in left_out:
        log.warning(
            "%s: a job record is left out of the snapshot (never requeued or planned for, "
            "its GPUs stay busy): %s",
            where,
            reason,
        )


def _shard_milli(parts: Parts) -> dict[str, tuple[int, ...]]:
    """``gpu_milli_used`` of the shard nodes whose backend could not state it (22.05's
    GresUsed names the GPUs carrying shards, not how many; pyslurm has no node view): from
    the running jobs' shards, the node's shards spread evenly over its GPUs (Slurm's split
    when gres.conf gives only a count). A busy GPU no visible job explains counts as full."""
    need = {n.name: n for n in parts.nodes if n.shards and n.gpu_count and not n.gpu_milli_used}
    if not need:
        return {}
    whole: dict[str, set[int]] = {name: set() for name in need}
    shards: dict[str, dict[int, int]] = {name: {} for name in need}
    for job in parts.jobs:
        if job.state not in HOLDS_GPUS:
            continue
        for name, idx in job.gpus.items():
            if name in whole:
                whole[name] |= idx
        for name, g, n in job.shard_use:
            if name in shards:
                shards[name][g] = shards[name].get(g, 0) + n
    out = {}
    for name, node in need.items():
        per_gpu = node.shards // node.gpu_count
        out[name] = tuple(
            MILLI
            if g in whole[name]
            else share_milli(shards[name][g], per_gpu)
            if g in shards[name]
            else (MILLI if g in node.gpus_used else 0)
            for g in range(node.gpu_count)
        )
    return out


def _checked(node: Node, found: Found | None) -> Found | None:
    """``found`` if its GPU count is the one Slurm reports. A mismatch from what the admin
    named is a config error; from a node's report or Slurm's own gres.conf (a GPU fell off
    the bus, a stale collector file) it leaves this node unknown, with a warning."""
    if found is None or not node.gpu_count:
        return None
    have = found.topology.gpu_count
    if have == node.gpu_count:
        return found
    what = f"topology of {node.name} (from {found.source}): {have} GPUs, Slurm reports"
    if not found.data:
        raise InputError(f"{what} {node.gpu_count} (check the setting that names it)")
    log.warning("%s %d; left unknown", what, node.gpu_count)
    return None


def _with(node: Node, updates: dict[str, object]) -> Node:
    # Re-validate rather than model_copy(update=...): copies skip validation and would
    # carry cached properties (reserved, schedulable) computed from the old values.
    return Node.model_validate({**node.model_dump(), **updates})
