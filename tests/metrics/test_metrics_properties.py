"""Properties of the metrics that must hold on every snapshot, checked with hypothesis.

Random snapshots are small (1-6 nodes of random built-in templates, random running jobs on
random free GPUs, GPUs busy with no visible job, random node states and pending requests),
so each example costs a few milliseconds.
"""

from __future__ import annotations

import json
from itertools import combinations
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slurm_defrag.domain.cluster import (
    ClusterSnapshot,
    Node,
)
from slurm_defrag.domain.topology import BUILTIN_TOPOLOGIES, GpuTopology
from slurm_defrag.metrics.compute import compute
from slurm_defrag.metrics.demand import DemandItem, MixSource, WorkloadMix
from slurm_defrag.metrics.node import node_metrics
from slurm_defrag.metrics.report import FragCounts, FragReport
from slurm_defrag.metrics.starvation import UNSATISFIABLE_EXAMPLES
from slurm_defrag.snapshot_file import dump_snapshot, parse_snapshot
from strategies import MODELS, TEMPLATES, snapshots

SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def rename(
    snap: ClusterSnapshot, node_map: dict[str, str], job_map: dict[str, str]
) -> ClusterSnapshot:
    """The same cluster with every node name and job id replaced through a bijection."""
    data: dict[str, Any] = json.loads(dump_snapshot(snap))
    for n in data["nodes"]:
        n["name"] = node_map[n["name"]]
    for j in data["jobs"]:
        j["id"] = job_map[j["id"]]
        j["gpus"] = {node_map[k]: v for k, v in j["gpus"].items()}
    for p in data["partitions"]:
        p["nodes"] = [node_map[n] for n in p["nodes"]]
    return parse_snapshot(data)


def counts_of(report: FragReport) -> list[FragCounts]:
    return [
        report.cluster_metrics.counts,
        *(g.counts for g in report.partitions),
        *(g.counts for g in report.models),
        *(m.counts for m in report.nodes),
    ]


@SETTINGS
@given(snapshots(), st.randoms(use_true_random=False))
def test_renaming_nodes_and_jobs_changes_no_metric(snap: ClusterSnapshot, rnd: Any) -> None:
    """Names are labels: a bijective renaming of nodes and jobs changes no figure.

    New names are shuffled so that their sort order differs from the old one (the diagnosis
    is sorted by node name, partitions by name).
    """
    old_nodes = [n.name for n in snap.nodes]
    new_nodes = [f"x{i}" for i in range(len(old_nodes))]
    rnd.shuffle(new_nodes)
    node_map = dict(zip(old_nodes, new_nodes, strict=True))
    old_jobs = [j.id for j in snap.jobs]
    new_jobs = [str(9000 + i) for i in range(len(old_jobs))]
    rnd.shuffle(new_jobs)
    job_map = dict(zip(old_jobs, new_jobs, strict=True))

    before, after = compute(snap), compute(rename(snap, node_map, job_map))

    assert after.mix == before.mix
    assert after.cluster_metrics == before.cluster_metrics
    assert after.partitions == before.partitions
    assert after.models == before.models
    by_name = {m.node: m for m in after.nodes}
    for m in before.nodes:
        assert by_name[node_map[m.node]] == m.model_copy(update={"node": node_map[m.node]})
    pending_after = {p.job_id: p for p in after.pending}
    assert len(pending_after) == len(before.pending)
    for p in before.pending:
        q = pending_after[job_map[p.job_id]]
        assert (q.status, q.reason, q.gpus, q.free_matching, q.free_in_partition) == (
            p.status,
            p.reason,
            p.gpus,
            p.free_matching,
            p.free_in_partition,
        )
        if p.status == "can-start" and p.message.startswith("fits now on "):
            named = p.message.removeprefix("fits now on ").split(", ")
            assert q.message == "fits now on " + ", ".join(node_map[n] for n in named)
        else:
            assert q.message == p.message
        if p.status == "unsatisfiable":
            # A few example nodes, picked in name order: which ones depends on the names,
            # how many and (when fewer reasons than examples) the reasons shown do not.
            assert (len(q.diagnosis), q.diagnosis_more) == (len(p.diagnosis), p.diagnosis_more)
            reasons = {(d.verdict, d.detail) for d in p.diagnosis}
            if len(reasons) < UNSATISFIABLE_EXAMPLES:
                assert {(d.verdict, d.detail) for d in q.diagnosis} == reasons
            continue
        assert {
            d.node: (d.verdict, d.free, d.largest_free_block, d.detail) for d in q.diagnosis
        } == {
            node_map[d.node]: (d.verdict, d.free, d.largest_free_block, d.detail)
            for d in p.diagnosis
        }


@SETTINGS
@given(snapshots())
def test_free_plus_used_is_gpus_at_every_scope(snap: ClusterSnapshot) -> None:
    report = compute(snap)
    for c in counts_of(report):
        assert c.free + c.used == c.gpus
    assert report.cluster_metrics.counts.gpus == sum(n.gpu_count for n in snap.nodes)
    held = sum(j.gpu_count for j in snap.running_gpu_jobs())
    assert report.cluster_metrics.counts.used >= held  # plus GPUs busy with no visible job


def _numbers(value: Any) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [value]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers(v)]
    if isinstance(value, list | tuple):
        return [x for v in value for x in _numbers(v)]
    return []


@SETTINGS
@given(snapshots())
def test_no_metric_is_negative_and_bounds_hold(snap: ClusterSnapshot) -> None:
    """Every number in the report is >= 0, and figures stay within the free GPUs they count.

    At every scope: free_unavailable <= free; unusable, outside_nvlink_blocks and FGD are at
    most the available free GPUs (FGD is a weighted mean of counts of them); k-GPU fits use
    at most the available free GPUs, and an NVLink fit is also a plain fit.
    """
    report = compute(snap)
    assert all(x >= 0 for x in _numbers(report.model_dump(mode="json"))), report
    for c in counts_of(report):
        available_free = c.free - c.free_unavailable
        assert 0 <= available_free <= c.free
        assert c.unusable.total <= available_free
        assert c.outside_nvlink_blocks <= available_free
        assert c.fgd <= available_free + 1e-9
        assert c.unusable_memory_gb <= c.free_memory_gb + 1e-9
        for k, n in c.fits.items():
            assert n * k <= available_free
            assert c.nvlink_fits[k] <= n


@SETTINGS
@given(snapshots())
def test_cluster_is_the_sum_of_its_nodes(snap: ClusterSnapshot) -> None:
    report = compute(snap)
    total, nodes = report.cluster_metrics.counts, [m.counts for m in report.nodes]
    for field in (
        "gpus",
        "used",
        "free",
        "free_unavailable",
        "whole_nodes_free",
        "outside_nvlink_blocks",
    ):
        assert getattr(total, field) == sum(getattr(c, field) for c in nodes), field
    assert total.unusable.total == sum(c.unusable.total for c in nodes)
    assert abs(total.fgd - sum(c.fgd for c in nodes)) < 1e-6
    assert report.cluster_metrics.largest_free_block == max(
        (m.largest_free_block for m in report.nodes), default=0
    )


@SETTINGS
@given(snapshots())
def test_snapshot_json_round_trip(snap: ClusterSnapshot) -> None:
    """dump -> load gives an equal snapshot, and dumping it again gives the same text."""
    text = dump_snapshot(snap)
    loaded = parse_snapshot(json.loads(text))
    assert loaded == snap
    assert dump_snapshot(loaded) == text
    assert loaded.free_masks == snap.free_masks


@SETTINGS
@given(snapshots())
def test_no_spatial_or_topology_starvation_on_an_idle_cluster(snap: ClusterSnapshot) -> None:
    """With every GPU free, scattering and broken NVLink blocks cannot be the cause.

    A job that could ever run on some node would fit there now, so a waiting job is
    can-start, short, unsatisfiable, held, or (model mismatch) configuration-starved; never
    falsely starved for ``spatial`` or ``topology``. This caught a 6-GPU NVLink job reported
    topology-starved on an idle DGX-1 (which has no 6-GPU block).
    """
    data: dict[str, Any] = json.loads(dump_snapshot(snap))
    data["jobs"] = [j for j in data["jobs"] if j["state"] == "PENDING"]
    for n in data["nodes"]:
        n["gpus_used"] = []
    idle = parse_snapshot(data)
    for p in compute(idle).pending:
        assert p.reason not in ("spatial", "topology"), p


# -- an all-free node -------------------------------------------------------------------


def fits_empty_node(item: DemandItem, node: Node, topo: GpuTopology) -> bool:
    """Independent oracle: could ``item`` start on this node if every GPU were free?

    Brute force over GPU subsets with ``is_block``, instead of the code's own fit logic.
    """
    if item.partition is not None and item.partition not in node.partitions:
        return False
    if item.gpu_model is not None and item.gpu_model != node.gpu_model:
        return False
    k = item.gpus_per_node
    if k > node.gpu_count:
        return False
    if not item.nvlink:
        return True
    return any(topo.is_block(c) for c in combinations(range(node.gpu_count), k))


items = st.builds(
    DemandItem,
    gpus_per_node=st.integers(1, 9),
    gpu_model=st.sampled_from((None, None, "a100", "h100")),
    nvlink=st.booleans(),
    whole_node=st.integers(0, 4).map(lambda x: x == 0),
    partition=st.sampled_from((None, None, "batch", "high")),
    weight=st.sampled_from((0.5, 1.0, 2.0, 5.0)),
)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(TEMPLATES), st.sampled_from(MODELS), st.lists(items, min_size=1, max_size=4))
def test_an_all_free_node_has_zero_fragmentation(
    template: str, model: str, mix_items: list[DemandItem]
) -> None:
    """On an idle, available node (built-in template) only structure can waste GPUs.

    Precisely, with n = the node's GPUs and W = the mix's total weight:

    * ``unusable.total == 0`` if at least one item of the mix fits the empty node (the
      node's partition, model, GPU count and, for NVLink items, some k-block exists);
      otherwise all n GPUs are unusable, for configuration or topology, never "spatial";
    * ``fgd == n * (weight of items that do not fit the empty node) / W``: an item that
      fits can use every GPU (on built-in templates every GPU lies in some k-block when
      k-blocks exist), an item that cannot fit sees all n as fragments. So ``fgd == 0``
      exactly when every item fits;
    * the node is one whole free node, its largest free block is its largest possible
      block, and no GPU is outside an NVLink block of a size some fitting item asks for.
    """
    topo = BUILTIN_TOPOLOGIES[template]
    node = Node(
        name="idle",
        partitions=("batch",),
        state="IDLE",
        gpu_model=model,
        gpu_count=topo.gpu_count,
        gpu_memory_gb=40.0,
        topology=template,
    )
    the_mix = WorkloadMix(source=MixSource.DECLARED, items=tuple(mix_items))
    m = node_metrics(node, topo, topo.all_mask, the_mix)
    c = m.counts
    n = topo.gpu_count

    fitting = [i for i in mix_items if fits_empty_node(i, node, topo)]
    if fitting:
        assert c.unusable.total == 0
    else:
        assert c.unusable.total == n
        assert c.unusable.spatial == 0
    not_fitting_weight = sum(i.weight for i in mix_items if i not in fitting)
    assert abs(c.fgd - n * not_fitting_weight / the_mix.total_weight) < 1e-9
    assert (c.fgd == 0) == (len(fitting) == len(mix_items))

    assert (c.free, c.used, c.free_unavailable, c.whole_nodes_free) == (n, 0, 0, 1)
    assert m.largest_free_block == topo.max_block
    # NVLink items this node's partition, model and size accept; if all of them ask for a
    # block size the topology never forms (3 on NVLink pairs), every GPU is outside one.
    compatible = [
        i
        for i in mix_items
        if i.nvlink and fits_empty_node(i.model_copy(update={"nvlink": False}), node, topo)
    ]
    blockless = all(not fits_empty_node(i, node, topo) for i in compatible)
    assert c.outside_nvlink_blocks == (n if compatible and blockless else 0)
