"""Slurm's own victim choice (select/cons_tres with preempt/partition_prio or preempt/qos).

Our reading of Slurm's documentation (preempt.html, slurm.conf ``PreemptParameters``) and
source (``src/plugins/preempt/*/preempt_*.c``, ``src/plugins/select/cons_tres``):

1. *Candidates*: running jobs the pending job may preempt (lower partition PriorityTier,
   or a QOS listed in its QOS's Preempt list) whose PreemptMode is REQUEUE or CANCEL, on
   nodes of the pending job's partition. Here: every unprotected running job there.
2. *Order*: ascending ``(priority << 16) + node_count``, where priority is the partition's
   PriorityTier (partition_prio) or the QOS priority (qos): lowest tier first, and among
   equals the jobs on fewer nodes first (comment in the plugins: "put smaller jobs at the
   top of the preemption queue ... to minimize the number of jobs preempted").
   ``PreemptParameters=youngest_first`` sorts by start time instead, youngest first.
3. *Search*: take candidates out of a simulated allocation one at a time, in that order,
   and try to place the job after each removal; stop at the first success.
4. *Victims*: the candidates holding resources on the nodes the job was given. Current
   releases list *every* candidate on those nodes; older ones (and the ``removed`` variant
   here) only those already taken out in the search.

Slurm knows nothing about what a job has lost, so it can pick the long-running job when a
short one would do, and it works per node, so it may requeue jobs on the chosen node whose
GPUs the job does not need.
"""

from __future__ import annotations

from typing import Literal

from slurm_defrag.baselines.common import BaselineResult, fits, result, setting
from slurm_defrag.domain.cluster import ClusterSnapshot, Job
from slurm_defrag.policy.file import Policy


def slurm_preempt(
    snapshot: ClusterSnapshot,
    policy: Policy,
    target_id: str,
    order: Literal["tier", "youngest"] = "tier",
    victims: Literal["overlap", "removed"] = "overlap",
) -> BaselineResult:
    name = f"slurm-{order}-{victims}"
    s = setting(snapshot, policy, target_id)
    if s is None:
        return BaselineResult(name, target_id, False, notes=["spreadable request"])
    tiers = {p.name: p.priority_tier for p in snapshot.partitions}

    def key(j: Job) -> tuple[float, ...]:
        if order == "youngest":
            return (-(j.start_time.timestamp() if j.start_time else 0.0),)
        return (float((tiers.get(j.partition, 1) << 16) + len(j.gpus)),)

    ordered = sorted(s.candidates, key=key)  # stable: snapshot order among equals
    free = dict(snapshot.free_masks)
    removed: list[Job] = []

    def placement() -> list[str] | None:
        ok = [n.name for n in s.eligible if fits(s, n, free[n.name])]
        return ok[: s.nodes_needed] if len(ok) >= s.nodes_needed else None

    chosen = placement()
    for job in ordered:
        if chosen is not None:
            break
        removed.append(job)
        for node, idx in job.gpus.items():
            for g in idx:
                free[node] |= 1 << g
        chosen = placement()
    if chosen is None:
        return BaselineResult(
            name,
            target_id,
            False,
            removed_in_search=len(removed),
            notes=["does not fit even with every candidate removed"],
        )
    pool = s.candidates if victims == "overlap" else removed
    picked = [j for j in pool if set(j.gpus) & set(chosen)]
    return result(s, name, chosen, picked, len(removed))
