"""One metrics pass over a snapshot: nodes, then partitions, GPU models and the cluster."""

from __future__ import annotations

from collections import defaultdict

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.gcpause import paused
from slurm_defrag.metrics.cache import MetricsCache
from slurm_defrag.metrics.classes import group_nodes
from slurm_defrag.metrics.demand import DemandItem, WorkloadMix, resolve_mix
from slurm_defrag.metrics.node import add_counts, node_figures, structural_verdicts
from slurm_defrag.metrics.report import FragReport, GroupMetrics, NodeMetrics
from slurm_defrag.metrics.starvation import NodeScan, diagnose_job


def _group(name: str, members: list[tuple[NodeMetrics, int]]) -> GroupMetrics:
    """Aggregate classes of identical nodes: (a prototype's figures, how many nodes)."""
    return GroupMetrics(
        name=name,
        nodes=sum(n for _, n in members),
        largest_free_block=max((m.largest_free_block for m, _ in members), default=0),
        counts=add_counts([(m.counts, n) for m, n in members]),
    )


def compute(
    snapshot: ClusterSnapshot, mix: WorkloadMix | None = None, cache: MetricsCache | None = None
) -> FragReport:
    """All fragmentation figures of one snapshot against a workload mix.

    ``mix`` defaults to the pending queue, or to a generic 1/2/4/8-GPU mix when nothing is
    pending (see :mod:`slurm_defrag.metrics.demand`). A ``cache`` kept across consecutive
    snapshots makes the pass incremental: only node classes not seen under the same mix
    are computed (the result is the same as without it).
    """
    with paused():
        return _compute(snapshot, mix, cache)


def _compute(
    snapshot: ClusterSnapshot, mix: WorkloadMix | None, cache: MetricsCache | None
) -> FragReport:
    mix = resolve_mix(snapshot, mix)
    if cache is None:
        cache = MetricsCache()
    cache.use_mix(mix)
    kinds = group_nodes(snapshot)
    per_node: dict[str, NodeMetrics] = {}
    everything: list[tuple[NodeMetrics, int]] = []
    by_partition: dict[str, list[tuple[NodeMetrics, int]]] = defaultdict(list)
    by_model: dict[str, list[tuple[NodeMetrics, int]]] = defaultdict(list)
    for kind in kinds:
        structural = None  # computed at most once per kind, and only if a class is new
        for cls in kind.classes:
            proto = cache.prototype(kind.key, cls.free_mask)
            if proto is None:
                if structural is None:
                    structural = structural_verdicts(kind.rep, kind.topo, mix)
                proto, lost = node_figures(kind.rep, kind.topo, cls.free_mask, mix, structural)
                cache.keep_prototype(kind.key, cls.free_mask, proto, lost)
            for member in cls.members:
                per_node[member.name] = cache.node_copy(member.name, proto)
            weighted = (proto, len(cls.members))
            everything.append(weighted)
            for p in kind.rep.partitions:
                by_partition[p].append(weighted)
            by_model[kind.rep.gpu_model or "?"].append(weighted)
    nodes = [per_node[n.name] for n in snapshot.nodes if n.name in per_node]
    scans: dict[DemandItem, NodeScan] = {}  # jobs of one shape share a scan of the nodes
    pending = tuple(
        diagnose_job(snapshot, j, kinds, scans, cache.diagnoses)
        for j in snapshot.pending_gpu_jobs()
    )
    return FragReport(
        cluster=snapshot.cluster,
        taken_at=snapshot.taken_at,
        mix=mix,
        cluster_metrics=cache.group("cluster", snapshot.cluster, everything, _group),
        partitions=tuple(
            cache.group("partition", p, ms, _group) for p, ms in sorted(by_partition.items())
        ),
        models=tuple(cache.group("model", m, ms, _group) for m, ms in sorted(by_model.items())),
        nodes=tuple(nodes),
        pending=pending,
        topology_unknown=snapshot.unknown_topology_nodes,
        topology_sources={k: len(v) for k, v in snapshot.topology_sources().items()},
    )
