"""Per-node view for candidate generation: who holds each GPU, what may be freed, at what
cost, and when each GPU frees itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from itertools import combinations

from slurm_defrag.domain.cluster import UNKNOWN_OWNER, ClusterSnapshot, Job, Node
from slurm_defrag.domain.topology import GpuTopology, popcount
from slurm_defrag.policy.cost import (
    CostConfig,
    VictimCost,
    restart_wait_hours,
    to_milli,
    victim_cost,
)
from slurm_defrag.policy.protections import Protector, movable

SUBSET_JOB_CAP = 12
"""A node with more requeueable jobs than this is only offered by block enumeration (its
2**n victim subsets would dominate the run time; no 8-GPU node gets near it)."""


@dataclass
class JobTable:
    """Requeueable jobs met so far, indexed in order of discovery, with their cost."""

    snapshot: ClusterSnapshot
    now: datetime
    cost_cfg: CostConfig
    protector: Protector
    node_index: dict[str, int]
    ids: list[str] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)
    costs: list[VictimCost] = field(default_factory=list)
    cost_milli: list[int] = field(default_factory=list)
    protected: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Job id -> protection reasons (also "not running" for jobs in other states)."""

    def classify(self, job: Job) -> int | None:
        """Index of a requeueable job, or None (protected or not running)."""
        if job.id in self.index:
            return self.index[job.id]
        if job.id in self.protected:
            return None
        if not movable(job):
            self.protected[job.id] = (f"state {job.state.value}",)
            return None
        why = self.protector.reasons(job)
        if why:
            self.protected[job.id] = why
            return None
        i = len(self.ids)
        self.ids.append(job.id)
        self.index[job.id] = i
        cfg = self.cost_cfg
        wait = (
            restart_wait_hours(job, self.snapshot, self.now, cfg.max_wait_hours)
            if cfg.requeue_wait_weight > 0
            else 0.0
        )
        c = victim_cost(job, self.now, cfg, wait)
        self.costs.append(c)
        self.cost_milli.append(to_milli(c.cost))
        return i


@dataclass
class NodeState:
    idx: int
    node: Node
    topo: GpuTopology
    free: int
    immovable: int
    """GPUs held by protected, non-running or unseen jobs (in a view of :meth:`below`,
    also by jobs too large to requeue for the question asked): never in a block."""
    job_mask: dict[int, int]
    """Requeueable job index -> its GPUs on this node."""
    owner: tuple[int | None, ...]
    """Per GPU: requeueable job index, or None (free or immovable)."""
    end_s: tuple[float | None, ...]
    """Per GPU: seconds until it is free without intervention (0: free; None: unknown)."""
    blocker_ids: tuple[str | None, ...]
    """Per GPU: the holding job's id (any job), for drain explanations."""
    coupled: bool
    """Holds GPUs of a requeueable multi-node job: its cost is not the node's alone."""
    _subsets: list[tuple[int, int, tuple[int, ...]]] | None = None
    _views: dict[int, NodeState] | None = None

    def below(self, size: int) -> NodeState:
        """The node as seen by shares taking ``size`` GPUs here together: a job holding
        at least ``size`` GPUs of this node counts as immovable, since requeueing it for
        them frees nothing for the cluster, it only moves who waits (the swap rule,
        docs/planner.md). ``self`` when no job is that large (the common case: no copy).
        ``coupled`` stays the whole node's."""
        views = self._views
        if views is None:
            views = self._views = {}
        view = views.get(size)
        if view is None:
            large = {j for j, m in self.job_mask.items() if popcount(m) >= size}
            if not large:
                view = self
            else:
                gone = 0
                for j in large:
                    gone |= self.job_mask[j]
                view = NodeState(
                    self.idx,
                    self.node,
                    self.topo,
                    self.free,
                    self.immovable | gone,
                    {j: m for j, m in self.job_mask.items() if j not in large},
                    tuple(None if j in large else j for j in self.owner),
                    self.end_s,
                    self.blocker_ids,
                    self.coupled,
                )
            views[size] = view
        return view

    def large_jobs(self, size: int) -> tuple[int, ...]:
        """Requeueable jobs holding at least ``size`` GPUs here (what :meth:`below` hides)."""
        return tuple(sorted(j for j, m in self.job_mask.items() if popcount(m) >= size))

    @property
    def room(self) -> int:
        """Most GPUs the plan's shares can take on this node together: a job holding as
        many is never requeued here (see :meth:`below`)."""
        return self.topo.gpu_count - popcount(self.immovable)

    def victims_of(self, mask: int) -> tuple[int, ...]:
        return tuple(
            sorted({j for g, j in enumerate(self.owner) if j is not None and mask >> g & 1})
        )

    def subsets(self, costs: list[int]) -> list[tuple[int, int, tuple[int, ...]]]:
        """(cost, usable mask, jobs) for every set of requeueable jobs here, cheapest first."""
        if self._subsets is None:
            jobs = sorted(self.job_mask)
            out: list[tuple[int, int, tuple[int, ...]]] = [(0, self.free, ())]
            if len(jobs) <= SUBSET_JOB_CAP:
                for r in range(1, len(jobs) + 1):
                    for combo in combinations(jobs, r):
                        m = self.free
                        for j in combo:
                            m |= self.job_mask[j]
                        out.append((sum(costs[j] for j in combo), m, combo))
            out.sort(key=lambda s: (s[0], len(s[2]), s[2]))
            self._subsets = out
        return self._subsets


def node_state(
    snapshot: ClusterSnapshot, idx: int, node: Node, table: JobTable, now: datetime
) -> NodeState:
    topo = snapshot.topology_of(node)
    owners = snapshot.gpu_owners[node.name]
    free = snapshot.free_masks[node.name]
    immovable = 0
    job_mask: dict[int, int] = {}
    owner: list[int | None] = []
    end: list[float | None] = []
    blockers: list[str | None] = []
    coupled = False
    for g, jid in enumerate(owners):
        if jid is None:
            owner.append(None)
            end.append(0.0)
            blockers.append(None)
            continue
        blockers.append(jid)
        job = snapshot.job_by_id.get(jid) if jid != UNKNOWN_OWNER else None
        end.append(_end_s(job, now))
        j = table.classify(job) if job is not None else None
        owner.append(j)
        if j is None:
            immovable |= 1 << g
        else:
            job_mask[j] = job_mask.get(j, 0) | 1 << g
            assert job is not None
            coupled = coupled or len(job.gpus) > 1
    assert (
        popcount(free) + popcount(immovable) + sum(map(popcount, job_mask.values()))
        == topo.gpu_count
    )
    return NodeState(
        idx,
        node,
        topo,
        free,
        immovable,
        job_mask,
        tuple(owner),
        tuple(end),
        tuple(blockers),
        coupled,
    )


def _end_s(job: Job | None, now: datetime) -> float | None:
    if job is None or job.start_time is None or job.time_limit_s is None:
        return None
    left = (job.start_time - now).total_seconds() + job.time_limit_s
    return max(0.0, left)
