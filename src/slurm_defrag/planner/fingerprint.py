"""A fingerprint of what a plan depends on, so a steady service cycle need not re-plan.

Two snapshots with the same fingerprint give the same targets, the same candidate nodes
with the same jobs on them (same GPUs, same protections, same prices but for the time
that passed), under the same policy and the same limit budget. What is left out on
purpose: the snapshot's time (victims' costs grow with it; the service re-plans after a
maximum age anyway, ``CycleRules.replan_after_s``), and everything on nodes outside the
targets' partitions (they can never host a target).

Hashing the relevant fields of 1,000 nodes and their jobs takes a few milliseconds; a
plan of the same snapshot takes about a second (``bench/cycle_bench.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime, timedelta

from slurm_defrag.domain.cluster import ClusterSnapshot, Job
from slurm_defrag.policy.file import Policy
from slurm_defrag.policy.limits import PreemptionHistory
from slurm_defrag.policy.protections import Protector, compile_protections


def plan_inputs_fingerprint(
    snapshot: ClusterSnapshot, policy: Policy, history: PreemptionHistory, now: datetime
) -> tuple[str, list[str]]:
    """(fingerprint, the strategies' targets in order): the caller passes the targets on
    to ``make_plan`` rather than have the strategies run twice."""
    h = hashlib.sha256()

    def add(*parts: object) -> None:
        h.update(repr(parts).encode())
        h.update(b"\n")

    add("policy", policy.model_dump_json())
    add("cluster", snapshot.cluster, snapshot.topologies, snapshot.nvlink_domains)
    seen: dict[str, None] = {}
    for strategy in policy.build_strategies():
        for c in strategy.propose(snapshot):
            seen.setdefault(c.job_id)
    partitions = _add_targets(add, snapshot, policy, seen)
    users = _add_nodes(add, snapshot, partitions, compile_protections(policy.protections, now))
    _add_history(add, snapshot, policy, history, now, seen, users)
    return h.hexdigest(), list(seen)


_Add = Callable[..., None]


def _add_targets(
    add: _Add, snapshot: ClusterSnapshot, policy: Policy, seen: dict[str, None]
) -> set[str]:
    """The targets' fields a plan reads; returns their partitions."""
    partitions: set[str] = set()
    for jid in seen:
        job = snapshot.job_by_id[jid]
        partitions.add(job.partition)
        add(
            "target",
            jid,
            job.partition,
            job.priority,
            job.submit_time,
            job.request,
            job.cpus_per_node,
            job.memory_mb_per_node,
            job.user,
            # weighed only with cost.target_wait_weight: otherwise backfill's re-estimates
            # would re-plan a steady cluster every cycle
            job.planned_start if policy.cost.target_wait_weight > 0 else None,
        )
    return partitions


def _add_nodes(
    add: _Add, snapshot: ClusterSnapshot, partitions: set[str], protector: Protector
) -> set[str]:
    """The nodes of the targets' partitions and the jobs on their GPUs; returns those
    jobs' users."""
    holders: dict[str, list[Job]] = {}
    for job in snapshot.jobs:
        for name in job.gpus:
            holders.setdefault(name, []).append(job)
    users: set[str] = set()
    for node in snapshot.nodes:
        if not any(p in partitions for p in node.partitions) and "" not in partitions:
            continue
        add(
            "node",
            node.name,
            node.partitions,
            sorted(node.state),
            node.gpu_model,
            node.gpu_count,
            node.topology,
            node.gpus_used,
            node.reservation,
            node.nvlink_domain,
            node.cpus,
            node.cpus_alloc,
            node.memory_mb,
            node.memory_alloc_mb,
        )
        for job in holders.get(node.name, []):
            users.add(job.user)
            # Protections at ``now`` (min-runtime ends with time) and what prices a
            # requeue (start, checkpoint comment, QOS, partition, time limit for drains).
            add(
                "job",
                job.id,
                job.state,
                sorted((k, sorted(v)) for k, v in job.gpus.items()),
                job.start_time,
                job.time_limit_s,
                job.requeue,
                job.qos,
                job.partition,
                job.user,
                job.account,
                job.name,
                job.comment,
                job.admin_comment,
                job.cpus_per_node,
                job.memory_mb_per_node,
                protector.reasons(job),
            )
    return users


def _add_history(
    add: _Add,
    snapshot: ClusterSnapshot,
    policy: Policy,
    history: PreemptionHistory,
    now: datetime,
    seen: dict[str, None],
    users: set[str],
) -> None:
    """The preemption history the limits read (only what a configured limit reads)."""
    lim = policy.limits
    add("active", history.active_plans() if lim.max_concurrent_plans is not None else None)
    if lim.max_preemptions_per_hour is not None:
        add("hour", history.preemptions_since(now - timedelta(hours=1)))
    victim_side = (
        lim.max_preemptions_per_user_per_day is not None
        or lim.max_gpu_hours_lost_per_user_per_day is not None
    )
    beneficiary_side = (
        lim.max_requeues_for_user_per_day is not None
        or lim.max_gpu_hours_lost_for_user_per_day is not None
    )
    if victim_side or beneficiary_side:
        usage = history.usage_by_user(now - timedelta(days=1))  # one read for every user
        if victim_side:
            add("users", [(u, usage.of(u)) for u in sorted(users)])
        if beneficiary_side:
            owners = sorted({snapshot.job_by_id[jid].user for jid in seen})
            add("for", [(u, usage.for_(u)) for u in owners])


__all__ = ["plan_inputs_fingerprint"]
