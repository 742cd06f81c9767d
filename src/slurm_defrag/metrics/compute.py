"""One metrics pass over a snapshot: nodes, then partitions, GPU models and the cluster."""

from __future__ import annotations

from collections import defaultdict

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.metrics.classes import group_nodes
from slurm_defrag.metrics.demand import WorkloadMix, resolve_mix
from slurm_defrag.metrics.node import add_counts, node_metrics, structural_verdicts
from slurm_defrag.metrics.report import FragReport, GroupMetrics, NodeMetrics
from slurm_defrag.metrics.starvation import diagnose_job


def _group(name: str, members: list[tuple[NodeMetrics, int]]) -> GroupMetrics:
    """Aggregate classes of identical nodes: (a prototype's figures, how many nodes)."""
    return GroupMetrics(
        name=name,
        nodes=sum(n for _, n in members),
        largest_free_block=max((m.largest_free_block for m, _ in members), default=0),
        counts=add_counts([(m.counts, n) for m, n in members]),
    )


def compute(snapshot: ClusterSnapshot, mix: WorkloadMix | None = None) -> FragReport:
    """All fragmentation figures of one snapshot against a workload mix.

    ``mix`` defaults to the pending queue, or to a generic 1/2/4/8-GPU mix when nothing is
    pending (see :mod:`slurm_defrag.metrics.demand`).
    """
    mix = resolve_mix(snapshot, mix)
    kinds = group_nodes(snapshot)
    per_node: dict[str, NodeMetrics] = {}
    everything: list[tuple[NodeMetrics, int]] = []
    by_partition: dict[str, list[tuple[NodeMetrics, int]]] = defaultdict(list)
    by_model: dict[str, list[tuple[NodeMetrics, int]]] = defaultdict(list)
    for kind in kinds:
        structural = structural_verdicts(kind.rep, kind.topo, mix)
        for cls in kind.classes:
            proto = node_metrics(kind.rep, kind.topo, cls.free_mask, mix, structural)
            fields = proto.__dict__
            for member in cls.members:  # no re-validation: the prototype was validated
                per_node[member.name] = NodeMetrics.model_construct(
                    **{**fields, "node": member.name}
                )
            weighted = (proto, len(cls.members))
            everything.append(weighted)
            for p in kind.rep.partitions:
                by_partition[p].append(weighted)
            by_model[kind.rep.gpu_model or "?"].append(weighted)
    nodes = [per_node[n.name] for n in snapshot.nodes if n.name in per_node]
    pending = tuple(diagnose_job(snapshot, j, kinds) for j in snapshot.pending_gpu_jobs())
    return FragReport(
        cluster=snapshot.cluster,
        taken_at=snapshot.taken_at,
        mix=mix,
        cluster_metrics=_group(snapshot.cluster, everything),
        partitions=tuple(_group(p, ms) for p, ms in sorted(by_partition.items())),
        models=tuple(_group(p, ms) for p, ms in sorted(by_model.items())),
        nodes=tuple(nodes),
        pending=pending,
    )
