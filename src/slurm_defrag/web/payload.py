"""What the page shows, as JSON: built from the snapshot, its metrics and the store's records.

Pure functions, no I/O: the GPU map per node and GPU slot (who holds it, or whether a free
GPU is in a free NVLink block or stranded), the falsely starved jobs with their reason, the
history views and the plans with steps and commands.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pydantic import ValidationError

from slurm_defrag.domain.cluster import UNKNOWN_OWNER, ClusterSnapshot, Node
from slurm_defrag.domain.job_colours import colour_slots
from slurm_defrag.domain.plan import Plan
from slurm_defrag.domain.topology import indices_of
from slurm_defrag.domain.unknown_topology import unknown_topology_line
from slurm_defrag.metrics.report import FragReport, request_text
from slurm_defrag.store.frag_history import History
from slurm_defrag.store.impact import Impact, verdict
from slurm_defrag.store.plans import CommandRecord, PlanRecord, StepRecord

Json = dict[str, Any]


def gpu_cells(snapshot: ClusterSnapshot, node: Node) -> list[Json]:
    """One entry per GPU slot: ``status`` busy | unknown | block | stranded | off."""
    owners = snapshot.gpu_owners[node.name]
    topo = snapshot.topology_of(node)
    free = snapshot.free_masks[node.name] if node.available else 0
    # Free GPUs with a free NVLink peer: in some free block of 2 or more GPUs. The others
    # are stranded for any multi-GPU NVLink job, however many of them are free.
    sizes = frozenset(k for k in topo.block_sizes if k > 1)
    block = set(indices_of(topo.gpus_in_free_blocks(free, sizes))) if sizes else set()
    switch_starts = {grp[0] for grp in topo.pcie_switches[1:]}
    cells = []
    for i, owner in enumerate(owners):
        if owner == UNKNOWN_OWNER:
            status = "unknown"
        elif owner is not None:
            status = "busy"
        elif not node.available:
            status = "off"
        else:
            status = "block" if i in block else "stranded"
        cells.append(
            {
                "gpu": i,
                "job": owner if status == "busy" else None,
                "status": status,
                "switch_start": i in switch_starts,
            }
        )
    return cells


WEB_HUES = 12
"""Hues of the page's job colours, from cyan over blue, purple and red to orange (170° to
400°: not the yellow-green of free GPUs); each in two shades, 24 colours."""


def web_colour(slot: int) -> str:
    """The CSS colour of a :func:`~slurm_defrag.domain.job_colours.colour_slots` slot.
    Slots next to each other (what a job takes when its own is in use beside it) are 5
    hues, 96°, apart; slots beyond the 24 spread by the golden angle."""
    if slot < 2 * WEB_HUES:
        hue = 170 + (slot * 5 % WEB_HUES) * 230 / WEB_HUES
        light = 36 if slot < WEB_HUES else 50
    else:
        hue = 170 + slot * 137.508 % 230
        light = 30 + slot % 4 * 6
    return f"hsl({hue % 360:.1f}, 65%, {light}%)"


def snapshot_payload(
    snapshot: ClusterSnapshot, report: FragReport, snapshot_id: int | None = None
) -> Json:
    """The GPU map, the summary line and the falsely starved jobs of one snapshot."""
    metrics = {m.node: m for m in report.nodes}
    jobs = snapshot.job_by_id
    slots = colour_slots(snapshot, 2 * WEB_HUES)
    c = report.cluster_metrics.counts
    return {
        "cluster": snapshot.cluster,
        "taken_at": snapshot.taken_at,
        "source": snapshot.source,
        "snapshot_id": snapshot_id,
        "summary": {
            "nodes": len(snapshot.nodes),
            "gpus": c.gpus,
            "used": c.used,
            "free": c.free,
            "unusable": c.unusable.model_dump(),
            "unusable_total": c.unusable.total,
            "fgd": round(c.fgd, 2),
            "pending": len(report.pending),
            "falsely_starved": len(report.falsely_starved),
        },
        "nodes": [
            {
                "name": n.name,
                "partitions": list(n.partitions),
                "gpu_model": n.gpu_model,
                "topology": snapshot.topology_of(n).name,
                "state": sorted(n.state),
                "available": n.available,
                "reason": n.reason,
                "reservation": n.reservation,
                "largest_free_block": m.largest_free_block if (m := metrics.get(n.name)) else 0,
                "gpus": gpu_cells(snapshot, n),
            }
            for n in snapshot.nodes
        ],
        # The page shows this line as a banner: nodes of unknown topology are modelled
        # without NVLink, so their figures are a lower bound, not a measurement.
        "topology_unknown": {
            "nodes": len(report.topology_unknown),
            "message": unknown_topology_line(report.topology_unknown),
        },
        "jobs": {
            j.id: {
                "user": j.user,
                "name": j.name,
                "partition": j.partition,
                "gpus": j.gpu_count,
                # distinct from every job sharing a node with it (domain/job_colours.py)
                "colour": web_colour(slots.get(j.id, 0)),
            }
            for j in snapshot.running_gpu_jobs()
        },
        "starving": [
            {
                "job_id": p.job_id,
                "user": jobs[p.job_id].user if p.job_id in jobs else "",
                "partition": p.partition,
                "request": request_text(p),
                "reason": p.reason,
                "message": p.message,
                "free_matching": p.free_matching,
            }
            for p in report.falsely_starved
        ],
    }


def history_payload(history: History) -> Json:
    return asdict(history)


def impact_payload(impact: Impact) -> Json:
    """The impact report as ``report impact --json`` gives it, each comparison with its
    verdict (better, worse, no clear change)."""
    out = asdict(impact)
    for row, c in zip(out["comparisons"], impact.comparisons, strict=True):
        row["verdict"] = verdict(c)
    return out


def plan_payload(plan: PlanRecord, steps: list[StepRecord], commands: list[CommandRecord]) -> Json:
    """A plan record with its steps and audited Slurm commands, plus the planner's summary
    (targets, victims, reservation) when the record holds a plan (packing records do not)."""
    out: Json = {
        **asdict(plan), "open": plan.open, "kind": plan.inputs.get("kind", "defrag"),
        "steps": [asdict(s) for s in steps],
        "commands": [{**asdict(c), "outcome": c.outcome} for c in commands],
        "targets": [], "victims": [], "reservation": None, "explanation": "",
    }  # fmt: skip
    del out["inputs"]  # large and internal; the summary below is what a reader needs
    try:
        planned = Plan.model_validate(plan.inputs["plan"]) if "plan" in plan.inputs else None
    except ValidationError:  # written by another version: show the record without it
        planned = None
    if planned is not None:
        out["targets"] = [
            {
                "job_id": t.job_id,
                "user": t.user,
                "request": t.request,
                "served": t.served,
                "placements": [{"node": p.node, "gpus": list(p.gpus)} for p in t.placements],
                "explanation": t.explanation,
            }
            for t in planned.targets
        ]
        out["victims"] = [
            {
                "job_id": v.job_id,
                "user": v.user,
                "gpus": {k: list(g) for k, g in v.gpus.items()},
                "lost_gpu_hours": v.lost_gpu_hours,
                "reason": v.reason,
            }
            for v in planned.victims
        ]
        out["reservation"] = planned.reservation
        out["explanation"] = planned.explanation
    return out
