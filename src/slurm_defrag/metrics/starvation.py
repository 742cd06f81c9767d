"""False starvation: pending GPU jobs that would start if free GPUs were not fragmented.

For each pending GPU job waiting on resources:

* *can-start*: a placement exists right now (Slurm may simply not have scheduled it yet, or
  higher-priority work is ahead of it);
* *falsely-starved*: no placement exists, yet the free GPUs on nodes that could ever host it
  (its partition, its GPU model, a topology with big enough NVLink blocks, enough nodes)
  add up to its request. The reason is ``topology`` when enough of those nodes have the GPU
  count but not an NVLink block, else ``spatial``;
* *falsely-starved / configuration* (or */ topology*): the free GPUs of its partition would
  suffice, but they are of another model (or on nodes whose NVLink topology can never give
  the block);
* *short*: even unfragmented, the free GPUs would not suffice: a real capacity shortage, or
  the nodes that could host it are drained, down or reserved;
* *unsatisfiable*: the hardware of its partition could never host it (model, GPU count,
  topology, too few such nodes or GPUs), whatever their state: a request to fix;
* *held*: waiting on something fragmentation cannot explain (hold, dependency, begin time);
* *topology-unknown*: an NVLink job that does not fit now, where nodes of its partition
  that could host it but for their NVLink wiring have an *unknown* topology (no source gave
  it): whether they form its block, and so whether it is falsely starved, short or
  unsatisfiable, cannot be told. Never reported as topology fragmentation.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from slurm_defrag.domain.cluster import ClusterSnapshot, GpuRequest, Job, Node, is_unknown
from slurm_defrag.domain.topology import popcount
from slurm_defrag.metrics.classes import NodeClass, NodeKind, group_nodes
from slurm_defrag.metrics.demand import DemandItem, item_for_request, waits_on_resources
from slurm_defrag.metrics.fit import (
    Verdict,
    explain,
    free_verdict,
    hardware_verdict,
    structural_verdict,
)
from slurm_defrag.metrics.report import NodeDiagnosis, PendingStatus


@dataclass(slots=True)
class NodeScan:
    """One demand item against every node class: the part of a diagnosis that jobs of the
    same shape share (a queue of 30 identical 8-GPU jobs scans the nodes once)."""

    rows: list[tuple[NodeClass, Verdict]]
    free_in_partition: int
    ever_nodes: int
    """Nodes (and GPUs) whose hardware could host a share, whatever their state."""
    ever_gpus: int
    fitting: list[NodeClass]
    """Classes a share fits on now."""
    n_fitting: int
    n_capable: int
    """Nodes that could host a share once their GPUs are free (they take new work)."""
    free_matching: int
    count_ok: int
    """Capable nodes with enough free GPUs, NVLink-connected or not."""
    wired_out: int
    """Free GPUs of available nodes whose NVLink topology never forms the block."""
    unknown_nodes: int = 0
    """Nodes of unknown topology that only their (unknown) NVLink wiring rules out."""
    diagnosis: tuple[NodeDiagnosis, ...] | None = None
    """Node-by-node explanation, built when a job of this shape is falsely starved."""
    never: tuple[tuple[NodeDiagnosis, ...], int] | None = None
    """Why nodes can never host it (a few examples, how many more): when unsatisfiable."""


UNSATISFIABLE_EXAMPLES = 5
"""Nodes an unsatisfiable job's diagnosis names (each different reason first)."""


DiagnosisMemo = dict[tuple[object, ...], dict[str, NodeDiagnosis]]
"""(demand item, node kind, free mask, verdict) -> node name -> its diagnosis, kept across
snapshots: a class of nodes that did not change explains itself with the same objects."""


def diagnose_job(
    snapshot: ClusterSnapshot,
    job: Job,
    kinds: list[NodeKind] | None = None,
    scans: dict[DemandItem, NodeScan] | None = None,
    diagnoses: DiagnosisMemo | None = None,
) -> PendingStatus:
    """Classify one pending job; ``kinds`` (from :func:`group_nodes`) saves regrouping.

    ``scans`` is a memo for one snapshot (and its ``kinds``): pass the same dict for all
    its pending jobs so that jobs of one shape share the node scan and the diagnosis.
    ``diagnoses`` may be kept across snapshots (see :data:`DiagnosisMemo`).
    """
    req = job.request
    assert req is not None
    item = item_for_request(req, job.partition)
    shape = req.per_node_shape()
    base = {
        "job_id": job.id,
        "partition": job.partition,
        "gpus": req.gpus,
        "nodes": req.nodes,
        "gpus_per_node": shape[1] if shape else None,
        "gpu_model": req.gpu_model,
        "nvlink": req.nvlink,
    }
    if not waits_on_resources(job.reason):
        return PendingStatus(**base, status="held", message=f"pending: {job.reason}")

    if kinds is None:
        kinds = group_nodes(snapshot)
    scan = scans.get(item) if scans is not None else None
    if scan is None:
        scan = _scan(kinds, item)
        if scans is not None:
            scans[item] = scan
    free_in_partition, free_matching = scan.free_in_partition, scan.free_matching
    counts = {"free_matching": free_matching, "free_in_partition": free_in_partition}
    can_start, where = _starts_now(req, shape, scan)
    if can_start:
        return PendingStatus(**base, status="can-start", message=where, **counts)
    if scan.unknown_nodes:
        # The unknown nodes are modelled without NVLink, which would make this job look
        # topology-fragmented or unsatisfiable: say what is actually known instead.
        return PendingStatus(
            **base,
            status="topology-unknown",
            message=(
                f"needs {req.gpus} NVLink-connected GPUs; {scan.unknown_nodes} node(s) that "
                "could host it have an unknown NVLink topology (set gres_conf, topology_map "
                "or topology_dir)"
            ),
            diagnosis=_scan_diagnosis(scan, item, diagnoses),
            **counts,
        )
    status, reason, message = _classify(req, shape, scan)
    diagnosis: tuple[NodeDiagnosis, ...] = ()
    more = 0
    if status == "falsely-starved":
        diagnosis = _scan_diagnosis(scan, item, diagnoses)
    elif status == "unsatisfiable" and shape is not None:  # spread --gpus=N: the total
        if scan.never is None:
            scan.never = _never_diagnosis(kinds, item)
        diagnosis, more = scan.never
    return PendingStatus(
        **base,
        status=status,
        reason=reason,
        message=message or _message(status, reason, req.gpus, free_matching, free_in_partition),
        diagnosis=diagnosis,
        diagnosis_more=more,
        **counts,
    )


def _starts_now(req: GpuRequest, shape: tuple[int, int] | None, scan: NodeScan) -> tuple[bool, str]:
    """(the job could start now, where)."""
    if shape is None:  # spreadable --gpus=N: any free GPU of a usable node counts
        return scan.free_matching >= req.gpus, f"{scan.free_matching} usable GPUs free"
    names = [n.name for c in scan.fitting for n in c.members][: shape[0]]
    return scan.n_fitting >= shape[0], f"fits now on {', '.join(names)}"


def _classify(
    req: GpuRequest, shape: tuple[int, int] | None, scan: NodeScan
) -> tuple[str, str | None, str | None]:
    """(status, reason, message or None for the standard one) of a job that cannot start
    now: the hardware never suffices, too little of it takes work, or it is starved."""
    n_nodes = shape[0] if shape is not None else 1
    reason: str | None = None
    message: str | None = None
    if scan.ever_nodes < n_nodes or scan.ever_gpus < req.gpus:
        status = "unsatisfiable"
        if scan.ever_nodes:  # some hardware fits, just not enough of it
            message = (
                f"needs {n_nodes} node(s) / {req.gpus} GPUs; its partition has only "
                f"{scan.ever_nodes} node(s) / {scan.ever_gpus} GPUs that could ever host it"
            )
    elif scan.n_capable < n_nodes:
        status = "short"
        message = (
            f"needs {n_nodes} node(s); only {scan.n_capable} that could host it take new "
            "work (the others are drained, down or reserved)"
        )
    elif scan.free_matching >= req.gpus:
        status = "falsely-starved"
        reason = "topology" if shape is not None and scan.count_ok >= n_nodes else "spatial"
    elif scan.free_in_partition >= req.gpus:
        status = "falsely-starved"
        # Free GPUs of the right model on nodes whose NVLink topology never forms the block:
        # the hardware's wiring, not its model, keeps the job out.
        wired = scan.free_matching + scan.wired_out
        reason = "topology" if wired >= req.gpus else "configuration"
    else:
        status = "short"
    return status, reason, message


def _never_verdict(kind: NodeKind, free: int, item: DemandItem) -> Verdict:
    """Why a node cannot take the job, hardware first: its partition, GPU model and count,
    NVLink wiring; then its state; then (hardware fine) its free GPUs now."""
    if item.partition is not None and item.partition not in kind.rep.partitions:
        return Verdict.NOT_IN_PARTITION
    hw = hardware_verdict(kind.rep, kind.topo, item)
    if hw is not None:
        return hw
    if not kind.available:
        return Verdict.UNAVAILABLE
    return free_verdict(kind.topo, free, item)


def _never_diagnosis(
    kinds: list[NodeKind], item: DemandItem
) -> tuple[tuple[NodeDiagnosis, ...], int]:
    """A few nodes, each with why it cannot take an unsatisfiable job, and how many more.

    Nodes of the job's partition come before the others, and one node per distinct reason
    before any second one, so the few shown cover the reasons there are.

    Only rows that can be picked are built. The nodes of a class share its reason (but
    unavailable ones: each gives its own state), so a class can only contribute its
    :data:`UNSATISFIABLE_EXAMPLES` first names, in name order: the first node of each
    reason and the first few overall are among them. A diagnosis per node of a
    10,000-node cluster, to keep five, was most of a metrics pass (issue #42).
    """
    rows: list[tuple[bool, str, str, Verdict, str, int, int]] = []
    total = 0
    for kind in kinds:
        for cls in kind.classes:
            free = cls.free_mask if kind.available else 0
            v = _never_verdict(kind, free, item)
            own = v is Verdict.UNAVAILABLE
            detail = "" if own else explain(kind.rep, kind.topo, free, item, v)
            largest, n_free = kind.topo.largest_free_block(free), popcount(cls.free_mask)
            total += len(cls.members)
            members = (
                cls.members
                if own
                else heapq.nsmallest(UNSATISFIABLE_EXAMPLES, cls.members, key=_name)
            )
            for n in members:
                text = explain(n, kind.topo, free, item, v) if own else detail
                flag = v is Verdict.NOT_IN_PARTITION
                rows.append((flag, f"{v}: {text}", n.name, v, text, n_free, largest))
    rows.sort(key=lambda r: (r[0], r[2]))
    picked: list[tuple[bool, str, str, Verdict, str, int, int]] = []
    reasons: set[str] = set()
    for r in rows:  # one node per distinct reason first ...
        if r[1] not in reasons and len(picked) < UNSATISFIABLE_EXAMPLES:
            reasons.add(r[1])
            picked.append(r)
    taken = {r[2] for r in picked}
    picked += [r for r in rows if r[2] not in taken][: UNSATISFIABLE_EXAMPLES - len(picked)]
    picked.sort(key=lambda r: (r[0], r[2]))
    shown = tuple(
        NodeDiagnosis.model_construct(
            node=name, verdict=v, free=n_free, largest_free_block=largest, detail=text
        )
        for _, _, name, v, text, n_free, largest in picked
    )
    return shown, total - len(picked)


def _name(node: Node) -> str:
    return node.name


def _message(status: str, reason: str | None, gpus: int, matching: int, partition: int) -> str:
    if status == "short":
        return f"needs {gpus} GPUs, only {partition} free in its partition"
    if status == "unsatisfiable":
        return "no node of its partition can ever host it (GPU model, GPU count or topology)"
    if reason == "configuration":
        return (
            f"needs {gpus} GPUs: {partition} free in its partition, but only {matching} on "
            "nodes of a GPU model and topology it can use"
        )
    if reason == "topology" and matching < gpus:
        return (
            f"needs {gpus} GPUs: {partition} free in its partition, but only {matching} on "
            "nodes whose NVLink topology can form its block"
        )
    if reason == "topology":
        return (
            f"needs {gpus} GPUs: {matching} free on nodes it can use, enough per node, but not "
            "NVLink-connected"
        )
    return f"needs {gpus} GPUs: {matching} free on nodes it can use, but scattered"


def _scan(kinds: list[NodeKind], item: DemandItem) -> NodeScan:
    rows, free_in_partition, ever_nodes, ever_gpus, unknown_nodes = _scan_rows(kinds, item)
    k = item.gpus_per_node
    fitting = [c for c, v in rows if v is Verdict.FITS]
    capable = [
        c for c, v in rows
        if v in (Verdict.FITS, Verdict.SPATIAL)
        or (v is Verdict.TOPOLOGY and c.topo.can_form_block(k))
    ]  # fmt: skip
    return NodeScan(
        rows=rows,
        free_in_partition=free_in_partition,
        ever_nodes=ever_nodes,
        ever_gpus=ever_gpus,
        fitting=fitting,
        n_fitting=sum(len(c.members) for c in fitting),
        n_capable=sum(len(c.members) for c in capable),
        free_matching=sum(popcount(c.free_mask) * len(c.members) for c in capable),
        count_ok=sum(len(c.members) for c in capable if popcount(c.free_mask) >= k),
        wired_out=sum(
            popcount(c.free_mask) * len(c.members)
            for c, v in rows
            if v is Verdict.TOPOLOGY and not c.topo.can_form_block(k) and c.available
        ),
        unknown_nodes=unknown_nodes,
    )


def _scan_rows(
    kinds: list[NodeKind], item: DemandItem
) -> tuple[list[tuple[NodeClass, Verdict]], int, int, int, int]:
    """Each node class of the item's partition with its verdict; and the partition's free
    GPUs, the nodes and GPUs that could ever host the item, the nodes of unknown topology."""
    rows: list[tuple[NodeClass, Verdict]] = []
    free_in_partition = 0
    ever_nodes = ever_gpus = unknown_nodes = 0
    for kind in kinds:
        if item.partition is not None and item.partition not in kind.rep.partitions:
            continue
        hardware = hardware_verdict(kind.rep, kind.topo, item)
        n_kind = sum(len(c.members) for c in kind.classes)
        if hardware is None:
            ever_nodes += n_kind
            ever_gpus += n_kind * kind.rep.gpu_count
        elif hardware is Verdict.TOPOLOGY and is_unknown(kind.topo):
            unknown_nodes += n_kind
        structural = structural_verdict(kind.rep, kind.topo, item)
        for cls in kind.classes:
            free = cls.free_mask if kind.available else 0
            free_in_partition += popcount(free) * len(cls.members)
            v = structural or free_verdict(kind.topo, free, item)
            rows.append((cls, v))
    return rows, free_in_partition, ever_nodes, ever_gpus, unknown_nodes


def _scan_diagnosis(
    scan: NodeScan, item: DemandItem, memo: DiagnosisMemo | None
) -> tuple[NodeDiagnosis, ...]:
    if scan.diagnosis is None:
        scan.diagnosis = _diagnosis(scan.rows, item, {} if memo is None else memo)
    return scan.diagnosis


def _diagnosis(
    rows: list[tuple[NodeClass, Verdict]], item: DemandItem, memo: DiagnosisMemo
) -> tuple[NodeDiagnosis, ...]:
    out: list[NodeDiagnosis] = []
    for cls, v in rows:
        if not cls.free_mask:
            continue  # a node with no free GPU needs no explanation
        # Nodes of one class share every figure, but not their state words or
        # reservation: an unavailable node is explained with its own (and not memoised).
        own = v is Verdict.UNAVAILABLE
        known = {} if own else memo.setdefault((item, cls.kind.key, cls.free_mask, v), {})
        new = [n for n in cls.members if n.name not in known]
        if new:
            free = cls.free_mask if cls.available else 0
            detail = explain(cls.rep, cls.topo, cls.free_mask, item, v)
            largest = cls.topo.largest_free_block(free)
            n_free = popcount(cls.free_mask)
            for n in new:
                text = explain(n, cls.topo, cls.free_mask, item, v) if own else detail
                # fields computed above; skip re-validation per node of a class
                known[n.name] = NodeDiagnosis.model_construct(
                    node=n.name, verdict=v, free=n_free, largest_free_block=largest, detail=text
                )
        out.extend(known[n.name] for n in cls.members)
    return tuple(sorted(out, key=lambda d: d.node))
