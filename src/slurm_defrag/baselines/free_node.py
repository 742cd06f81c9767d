"""A "free this node" heuristic of the KAI-scheduler kind.

For every node that could host the job, evict candidates on that node in victim order
(lowest Slurm priority first, then the cheapest to lose) until the job fits there; choose
the node that needs the fewest victims, then the cheapest. Multi-node jobs take the best
``m`` nodes. Fast and node-local, but greedy within a node: it may evict a job whose GPUs
end up outside the block it frees.
"""

from __future__ import annotations

from slurm_defrag.baselines.common import BaselineResult, fits, result, setting
from slurm_defrag.domain.cluster import ClusterSnapshot, Job
from slurm_defrag.policy.cost import victim_cost
from slurm_defrag.policy.file import Policy


def free_node(snapshot: ClusterSnapshot, policy: Policy, target_id: str) -> BaselineResult:
    name = "free-node"
    s = setting(snapshot, policy, target_id)
    if s is None:
        return BaselineResult(name, target_id, False, notes=["spreadable request"])
    options: list[tuple[int, float, str, list[Job]]] = []
    for node in s.eligible:
        free = snapshot.free_masks[node.name]
        here = sorted(
            (j for j in s.candidates if node.name in j.gpus),
            key=lambda j: (j.priority, victim_cost(j, s.now, s.policy.cost).cost, j.id),
        )
        taken: list[Job] = []
        for job in [None, *here]:
            if job is not None:
                taken.append(job)
                free |= sum(1 << g for g in job.gpus[node.name])
            if fits(s, node, free):
                cost = sum(victim_cost(j, s.now, s.policy.cost).cost for j in taken)
                options.append((len(taken), cost, node.name, list(taken)))
                break
    if len(options) < s.nodes_needed:
        return BaselineResult(name, target_id, False, notes=["too few nodes can be freed"])
    options.sort(key=lambda o: (o[0], o[1], o[2]))
    best = options[: s.nodes_needed]
    victims = list({j.id: j for o in best for j in o[3]}.values())
    return result(s, name, [o[2] for o in best], victims, 0)
