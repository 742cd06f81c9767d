"""Snapshot + policy + target jobs -> :class:`ProblemData` (through the candidates)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from slurm_defrag.domain.cluster import ClusterSnapshot, Job, Node
from slurm_defrag.metrics.demand import DemandItem
from slurm_defrag.planner.budget import Budget
from slurm_defrag.planner.candidates import Candidates, RawOption, TargetSpec
from slurm_defrag.planner.geometry import Geometry, demand_item, geometry_of
from slurm_defrag.planner.nodes import JobTable
from slurm_defrag.policy.cost import CostConfig, to_milli, wait_saved_hours
from slurm_defrag.solver.problem import (
    JobData,
    LimitData,
    NodeData,
    OptionData,
    OptionKind,
    ProblemData,
    ServedCap,
    TargetData,
)


def target_specs(snapshot: ClusterSnapshot, jobs: list[Job]) -> tuple[list[TargetSpec], list[Job]]:
    """Specs for the plannable targets, and the jobs left out (spreadable requests).

    Value: GPUs requested first (starting more GPU work is worth more), then Slurm
    priority, then time waited; integers so that the objective stays exact.
    """
    plannable: list[tuple[Job, DemandItem]] = []
    skipped: list[Job] = []
    for job in jobs:
        assert job.request is not None
        item = demand_item(job.request, job.partition)
        if item is None:
            skipped.append(job)
        else:
            plannable.append((job, item))
    order = sorted(
        range(len(plannable)),
        key=lambda i: (plannable[i][0].priority, -_submit_ts(plannable[i][0]), plannable[i][0].id),
    )
    rank = {i: r for r, i in enumerate(order)}
    scale = len(plannable) + 1
    specs = []
    # One object per distinct geometry: it is part of most memo keys of the candidates
    # (node, geometry), and equal objects compare in Python, the same one by identity.
    shared: dict[Geometry, Geometry] = {}
    for i, (job, item) in enumerate(plannable):
        assert job.request is not None
        same_domain = bool(item.nvlink and item.nodes > 1 and snapshot.nvlink_domains)
        # The share's host demand is part of its geometry: candidates must free CPUs and
        # memory too, not only GPUs (a node with a free GPU but no free CPUs is not "free").
        geometry = replace(
            geometry_of(item), cpus=job.cpus_per_node, memory_mb=job.memory_mb_per_node
        )
        geometry = shared.setdefault(geometry, geometry)
        specs.append(
            TargetSpec(
                job,
                item,
                geometry,
                item.nodes,
                value=job.request.gpus * scale + rank[i] + 1,
                same_domain=same_domain,
            )
        )
    return specs, skipped


def _submit_ts(job: Job) -> float:
    return job.submit_time.timestamp() if job.submit_time is not None else 0.0


@dataclass(frozen=True, slots=True)
class Ceiling:
    """What one share of a target may cost to be worth it (``cost.target_wait_weight``)."""

    cost: int
    """Most a requeue option may cost, milli GPU-hours: the weighted wait it saves, per node."""
    wait_s: float
    """A drain must hand the block over sooner than this (Slurm's own plan)."""

    def admits(self, o: RawOption) -> bool:
        if o.kind is OptionKind.DRAIN:
            return o.wait_s < self.wait_s
        return o.cost <= self.cost


def worth_ceilings(specs: list[TargetSpec], now: datetime, cfg: CostConfig) -> list[Ceiling | None]:
    """Per target, its :class:`Ceiling`; None everywhere when the policy does not weigh
    the target's wait. A target Slurm plans to start now gets no requeue with victims:
    the plan would only move the wait onto them."""
    if cfg.target_wait_weight <= 0:
        return [None] * len(specs)
    out: list[Ceiling | None] = []
    for s in specs:
        assert s.job.request is not None
        hours = wait_saved_hours(s.job, now, cfg.max_wait_hours)
        gain = cfg.target_wait_weight * s.job.request.gpus * hours / s.nodes
        out.append(Ceiling(to_milli(gain), hours * 3600))
    return out


@dataclass(frozen=True)
class Indexed:
    """ProblemData plus the maps back to the snapshot."""

    data: ProblemData
    node_names: tuple[str, ...]
    job_ids: tuple[str, ...]
    raw: tuple[RawOption, ...]


def to_problem(
    snapshot: ClusterSnapshot,
    specs: list[TargetSpec],
    cands: Candidates,
    table: JobTable,
    budget: Budget,
    now: datetime,
    ceilings: list[Ceiling | None] | None = None,
) -> Indexed:
    kept = _kept_options(snapshot, specs, cands, table, ceilings)
    jobs_used = sorted({j for o in kept for j in o.victims})
    job_new = {j: i for i, j in enumerate(jobs_used)}
    nodes_used = _nodes_used(snapshot, table, kept, jobs_used)
    node_new = {n: i for i, n in enumerate(nodes_used)}
    domains = tuple(sorted({d.name for d in snapshot.nvlink_domains}))
    node_data = _node_data(snapshot, nodes_used, domains)
    by_id = snapshot.job_by_id
    users = tuple(sorted({by_id[table.ids[j]].user for j in jobs_used}))
    job_data = _job_data(snapshot, table, jobs_used, node_new, users)
    option_list = _option_data(kept, node_new, job_new)
    targets = tuple(
        TargetData(
            s.job.id,
            s.value,
            s.nodes,
            s.item.gpus_per_node,
            s.same_domain,
            s.job.cpus_per_node,
            s.job.memory_mb_per_node,
            s.job.user,
        )
        for s in specs
    )
    limits = _limit_data(specs, option_list, job_data, users, budget)
    options = tuple(option_list)
    data = ProblemData(targets, tuple(node_data), tuple(job_data), users, options, limits, domains)
    return Indexed(
        data,
        tuple(snapshot.nodes[n].name for n in nodes_used),
        tuple(table.ids[j] for j in jobs_used),
        tuple(kept),
    )


def _kept_options(
    snapshot: ClusterSnapshot,
    specs: list[TargetSpec],
    cands: Candidates,
    table: JobTable,
    ceilings: list[Ceiling | None] | None,
) -> list[RawOption]:
    """The candidate options whose host demand fits and that are worth their cost."""
    # Per option only what can drop it: nodes with host data, targets with a ceiling
    # (228,000 options on the 10,000-node bench, nearly always neither).
    tracked = {o.node for o in cands.options if _host_tracked(snapshot.nodes[o.node])}
    caps = ceilings if ceilings is not None and any(c is not None for c in ceilings) else None
    return [
        o
        for o in cands.options
        if (o.node not in tracked or _host_fits(snapshot, specs[o.target].job, o, table))
        and (caps is None or (cap := caps[o.target]) is None or cap.admits(o))
    ]


def _nodes_used(
    snapshot: ClusterSnapshot, table: JobTable, kept: list[RawOption], jobs_used: list[int]
) -> list[int]:
    """The options' nodes and every node a candidate victim runs on (sorted indices)."""
    node_set = {o.node for o in kept}
    by_id = snapshot.job_by_id
    for j in jobs_used:
        for name in by_id[table.ids[j]].gpus:
            node_set.add(table.node_index[name])
    return sorted(node_set)


def _node_data(
    snapshot: ClusterSnapshot, nodes_used: list[int], domains: tuple[str, ...]
) -> list[NodeData]:
    dom_idx = {d: i for i, d in enumerate(domains)}
    node_data = []
    for n in nodes_used:
        node = snapshot.nodes[n]
        dom = snapshot.domain_of(node)
        node_data.append(
            NodeData(
                node.name,
                node.gpu_count,
                snapshot.free_masks[node.name],
                dom_idx[dom.name] if dom is not None else None,
                node.cpus_free,
                node.memory_free_mb,
            )
        )
    return node_data


def _job_data(
    snapshot: ClusterSnapshot,
    table: JobTable,
    jobs_used: list[int],
    node_new: dict[int, int],
    users: tuple[str, ...],
) -> list[JobData]:
    by_id = snapshot.job_by_id
    user_idx = {u: i for i, u in enumerate(users)}
    job_data = []
    for j in jobs_used:
        job = by_id[table.ids[j]]
        gpus = tuple(
            sorted((node_new[table.node_index[name]], _mask(idx)) for name, idx in job.gpus.items())
        )
        c = table.costs[j]
        job_data.append(
            JobData(
                job.id,
                user_idx[job.user],
                table.cost_milli[j],
                to_milli(c.lost_gpu_hours),
                gpus,
                job.cpus_per_node,
                job.memory_mb_per_node,
            )
        )
    return job_data


def _option_data(
    kept: list[RawOption], node_new: dict[int, int], job_new: dict[int, int]
) -> list[OptionData]:
    # Members of a class carry copies of the same options: convert each placement once.
    converted: dict[tuple[object, ...], tuple[int, tuple[int, ...], int]] = {}
    option_list = []
    for o in kept:
        key = (o.node, o.victims, o.kind, o.cost)
        hit = converted.get(key)
        if hit is None:
            hit = converted[key] = (
                node_new[o.node],
                tuple(sorted(job_new[j] for j in o.victims)),
                o.cost if o.kind == "drain" else 0,
            )
        option_list.append(
            OptionData(
                o.target, hit[0], o.mask, o.kind, hit[1], o.busy, hit[2], o.wait_s, o.blockers
            )
        )
    return option_list


def _limit_data(
    specs: list[TargetSpec],
    option_list: list[OptionData],
    job_data: list[JobData],
    users: tuple[str, ...],
    budget: Budget,
) -> LimitData:
    lost_caps = tuple(
        None if (x := budget.per_user_lost.get(u)) is None else to_milli(x) for u in users
    )
    return LimitData(
        max_victims=budget.victims,
        max_lost=None if budget.gpu_hours is None else to_milli(budget.gpu_hours),
        user_caps=tuple(budget.per_user.get(u) for u in users) if budget.per_user else (),
        user_lost_caps=lost_caps if budget.per_user_lost else (),
        served_caps=_served_caps(specs, option_list, job_data, users, budget),
    )


def _served_caps(
    specs: list[TargetSpec],
    options: list[OptionData],
    jobs: list[JobData],
    users: tuple[str, ...],
    budget: Budget,
) -> tuple[ServedCap, ...]:
    """The beneficiary caps that can bind. A cap cannot when the target user's candidate
    victims (other users' jobs in their targets' options) fit it all together, nor when
    no plan may requeue that many anyway (``max_victims_per_plan``, and the GPU-hours of
    that many of the costliest candidates). Users without one keep their targets grouped
    with other users' (:mod:`slurm_defrag.solver.groups`)."""
    if not budget.for_user:
        return ()
    others: dict[str, set[int]] = {}
    for o in options:
        user = specs[o.target].job.user
        if user in budget.for_user:
            mine = others.setdefault(user, set())
            mine.update(j for j in o.victims if users[jobs[j].user] != user)
    per_plan = budget.victims
    out = []
    for user, js in sorted(others.items()):
        left = budget.for_user[user]
        most = len(js) if per_plan is None else min(len(js), per_plan)
        count = left.requeues if left.requeues is not None and most > left.requeues else None
        lost = None if left.gpu_hours is None else to_milli(left.gpu_hours)
        costliest = sorted((jobs[j].lost for j in js), reverse=True)[:most]
        if lost is not None and sum(costliest) <= lost:
            lost = None
        if count is not None or lost is not None:
            out.append(ServedCap(user, count, lost))
    return tuple(out)


def _host_tracked(node: Node) -> bool:
    return node.cpus_free is not None or node.memory_free_mb is not None


def _host_fits(snapshot: ClusterSnapshot, target: Job, option: RawOption, table: JobTable) -> bool:
    """Could the node give the target's CPUs and memory once the option's victims (or, for a
    drain, its blockers) are gone? Untracked resources always fit; the model then checks
    that shares on one node do not together ask for more."""
    node = snapshot.nodes[option.node]
    if node.cpus_free is None and node.memory_free_mb is None:
        return True  # host resources not tracked: the common case, no lookups
    freed = [snapshot.job_by_id[table.ids[j]] for j in option.victims]
    freed += [snapshot.job_by_id[b] for b in option.blockers if b in snapshot.job_by_id]
    cpus, mem = node.cpus_free, node.memory_free_mb
    if cpus is not None and cpus + sum(j.cpus_per_node for j in freed) < target.cpus_per_node:
        return False
    return mem is None or mem + sum(j.memory_mb_per_node for j in freed) >= (
        target.memory_mb_per_node
    )


def _mask(idx: frozenset[int]) -> int:
    m = 0
    for i in idx:
        m |= 1 << i
    return m
