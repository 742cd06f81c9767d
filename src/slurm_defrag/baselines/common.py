"""Shared pieces of the baselines: the result, eligibility and the fit test."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from slurm_defrag.domain.cluster import ClusterSnapshot, Job, Node
from slurm_defrag.metrics.fit import structural_verdict
from slurm_defrag.planner.geometry import Geometry, blocks_for, demand_item, geometry_of
from slurm_defrag.policy.cost import victim_cost
from slurm_defrag.policy.file import Policy
from slurm_defrag.policy.protections import compile_protections, movable


@dataclass
class BaselineResult:
    name: str
    target: str
    served: bool
    nodes: tuple[str, ...] = ()
    victims: tuple[str, ...] = ()
    cost_gpu_hours: float = 0.0
    lost_gpu_hours: float = 0.0
    removed_in_search: int = 0
    """Jobs the search took out before the job fitted (Slurm's simulation)."""
    notes: list[str] = field(default_factory=list)


@dataclass
class Setting:
    snapshot: ClusterSnapshot
    policy: Policy
    target: Job
    geometry: Geometry
    nodes_needed: int
    eligible: list[Node]
    candidates: list[Job]
    """Running, unprotected jobs holding GPUs on an eligible node, in snapshot order."""
    now: datetime


def setting(snapshot: ClusterSnapshot, policy: Policy, target_id: str) -> Setting | None:
    job = snapshot.job_by_id[target_id]
    assert job.request is not None
    item = demand_item(job.request, job.partition)
    if item is None:
        return None
    now = snapshot.taken_at
    protector = compile_protections(policy.protections, now)
    eligible = [
        n
        for n in snapshot.nodes
        if n.gpu_count and structural_verdict(n, snapshot.topology_of(n), item) is None
    ]
    names = {n.name for n in eligible}
    cands = [
        j
        for j in snapshot.jobs
        if movable(j) and not protector.is_protected(j) and names & set(j.gpus)
    ]
    return Setting(snapshot, policy, job, geometry_of(item), item.nodes, eligible, cands, now)


def fits(s: Setting, node: Node, free: int) -> bool:
    return any(b & free == b for b in blocks_for(s.snapshot.topology_of(node), s.geometry))


def result(
    s: Setting, name: str, nodes: list[str], victims: list[Job], removed: int
) -> BaselineResult:
    costs = [victim_cost(v, s.now, s.policy.cost) for v in victims]
    return BaselineResult(
        name,
        s.target.id,
        True,
        tuple(nodes),
        tuple(v.id for v in victims),
        sum(c.cost for c in costs),
        sum(c.lost_gpu_hours for c in costs),
        removed,
    )
