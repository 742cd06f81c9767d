"""Problem data for the planner: targets, nodes, candidate victims, candidate placements.

Solver-agnostic and self-validating (PyJobShop's ``ProblemData``): cross-references are
integer indices, every invariant is checked in ``__post_init__`` with a message naming the
offending index, and lookups used by every model are precomputed once.

Units: costs and GPU-hours are integers in milli-GPU-hours (:data:`MILLI`); GPU sets are
bit masks (bit i = GPU index i) as in :mod:`slurm_defrag.domain.topology`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

__all__ = [
    "JobData",
    "LimitData",
    "NodeData",
    "OptionData",
    "OptionKind",
    "ProblemData",
    "ServedCap",
    "TargetData",
]


class OptionKind(StrEnum):
    REQUEUE = "requeue"
    """Take the block now, requeueing its victims (none: the block is already free)."""
    DRAIN = "drain"
    """Stop new work on the node and wait for the block's blockers to reach their time
    limit. The node then hosts no other share of the plan."""


@dataclass(frozen=True, slots=True)
class TargetData:
    job_id: str
    value: int
    """Worth of serving it; the objective serves the most total value first."""
    nodes: int
    """Shares: distinct nodes, one block on each."""
    gpus_per_node: int
    same_domain: bool = False
    """All shares inside one multi-node NVLink domain."""
    cpus: int = 0
    """CPUs each share needs on its node (0: none asked or not known)."""
    memory: int = 0
    """Memory each share needs on its node, MB."""
    user: str = ""
    """Its owner: whose beneficiary budget (:class:`ServedCap`) its victims spend."""

    def __post_init__(self) -> None:
        if self.value <= 0:
            raise ValueError(f"target {self.job_id}: value must be > 0")
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise ValueError(f"target {self.job_id}: needs >= 1 node and >= 1 GPU per node")


@dataclass(frozen=True, slots=True)
class NodeData:
    name: str
    gpu_count: int
    free_mask: int
    domain: int | None = None
    cpus_free: int | None = None
    """CPUs not allocated now (None: the node's CPUs are not tracked, never binding)."""
    memory_free: int | None = None
    """Memory not allocated now, MB (None: not tracked)."""

    def __post_init__(self) -> None:
        if self.free_mask >> self.gpu_count:
            raise ValueError(f"node {self.name}: free mask has GPUs beyond {self.gpu_count}")


@dataclass(frozen=True, slots=True)
class JobData:
    """A running job that may be requeued (protected jobs never appear here)."""

    job_id: str
    user: int
    cost: int
    """Weighted cost of requeueing it (milli-GPU-hours, incl. restart cost)."""
    lost: int
    """Unweighted GPU-hours of work lost (milli), what the GPU-hour limit counts."""
    gpus: tuple[tuple[int, int], ...]
    """(node index, GPU mask) for every node the job holds GPUs on."""
    cpus: int = 0
    """CPUs it holds on each of those nodes (freed when it is requeued)."""
    memory: int = 0
    """Memory it holds on each of those nodes, MB."""

    def __post_init__(self) -> None:
        if self.cost < 0 or self.lost < 0:
            raise ValueError(f"job {self.job_id}: negative cost")
        if not self.gpus:
            raise ValueError(f"job {self.job_id}: holds no GPUs")


@dataclass(frozen=True, slots=True)
class OptionData:
    """One way to give one share of a target: a block of GPUs on one node."""

    target: int
    node: int
    mask: int
    kind: OptionKind
    victims: tuple[int, ...] = ()
    """Jobs that must be requeued (kind REQUEUE): exactly the holders of busy GPUs in mask."""
    busy: int = 0
    """GPUs of the block not free now (the objective prefers free GPUs)."""
    drain_cost: int = 0
    """Kind DRAIN: GPU-hours (milli) left idle on the node while waiting."""
    wait_s: float = 0.0
    """Kind DRAIN: seconds until the last blocker's time limit."""
    blockers: tuple[str, ...] = ()
    """Kind DRAIN: job ids waited for."""


@dataclass(frozen=True, slots=True)
class ServedCap:
    """What requeues for one user's targets may still spend (the beneficiary side).

    A job counts against ``user`` when a taken option of one of their targets has it as
    a victim and it is not their own; a job freeing blocks for two users' targets counts
    for both. None: no cap."""

    user: str
    requeues: int | None = None
    lost: int | None = None
    """milli-GPU-hours"""

    def __post_init__(self) -> None:
        if (self.requeues is not None and self.requeues < 0) or (
            self.lost is not None and self.lost < 0
        ):
            raise ValueError(f"served cap of user {self.user}: negative")


@dataclass(frozen=True, slots=True)
class LimitData:
    max_victims: int | None = None
    max_lost: int | None = None
    """milli-GPU-hours"""
    user_caps: tuple[int | None, ...] = ()
    """Per user index: requeues still allowed (None: no cap)."""
    user_lost_caps: tuple[int | None, ...] = ()
    """Per user index: milli-GPU-hours their requeued jobs may still lose (None: no cap)."""
    served_caps: tuple[ServedCap, ...] = ()
    """Per target user with a cap that may bind (others are absent: no cap)."""


@dataclass(frozen=True)
class ProblemData:
    targets: tuple[TargetData, ...]
    nodes: tuple[NodeData, ...]
    jobs: tuple[JobData, ...]
    users: tuple[str, ...]
    options: tuple[OptionData, ...]
    limits: LimitData = LimitData()
    domains: tuple[str, ...] = ()

    target_options: tuple[tuple[int, ...], ...] = field(init=False, repr=False)
    node_options: tuple[tuple[int, ...], ...] = field(init=False, repr=False)
    job_options: tuple[tuple[int, ...], ...] = field(init=False, repr=False)
    target_cap: tuple[int | None, ...] = field(init=False, repr=False)
    """Per target: the index of its user's entry in ``limits.served_caps`` (None: none)."""
    swap_need: tuple[int, ...] = field(init=False, repr=False)
    """Per option: the GPUs the plan's requeue shares on its node must take together
    (its own included) for it to be taken, 0 when its own share is enough. The swap
    rule: a job is never requeued for shares on a node that take no more GPUs there than
    it holds (a same-size swap frees nothing, it only moves who waits), so an option
    whose largest victim holds ``h`` GPUs of the node, ``h`` at least its own mask's,
    needs ``h + 1``."""

    def __post_init__(self) -> None:
        self._validate()
        by_t: list[list[int]] = [[] for _ in self.targets]
        by_n: list[list[int]] = [[] for _ in self.nodes]
        by_j: list[list[int]] = [[] for _ in self.jobs]
        for i, o in enumerate(self.options):
            by_t[o.target].append(i)
            by_n[o.node].append(i)
            for j in o.victims:
                by_j[j].append(i)
        object.__setattr__(self, "target_options", tuple(map(tuple, by_t)))
        object.__setattr__(self, "node_options", tuple(map(tuple, by_n)))
        object.__setattr__(self, "job_options", tuple(map(tuple, by_j)))
        cap_of = {c.user: i for i, c in enumerate(self.limits.served_caps)}
        object.__setattr__(self, "target_cap", tuple(cap_of.get(t.user) for t in self.targets))
        object.__setattr__(self, "swap_need", self._swap_need())

    def _swap_need(self) -> tuple[int, ...]:
        held = {(j, n): mask.bit_count() for j, job in enumerate(self.jobs) for n, mask in job.gpus}
        out = []
        for o in self.options:
            most = 0
            for j in o.victims:  # validated: each holds GPUs on the option's node
                gpus = held[(j, o.node)]
                if gpus > most:
                    most = gpus
            out.append(most + 1 if most and most >= o.mask.bit_count() else 0)
        return tuple(out)

    def _validate(self) -> None:
        self._validate_jobs_and_nodes()
        held = {(j, n): mask for j, job in enumerate(self.jobs) for n, mask in job.gpus}
        # Interchangeable targets carry copies of one placement: check each placement
        # once per kind of target it is offered to (the checks read nothing else).
        checked: set[tuple[object, ...]] = set()
        for i, o in enumerate(self.options):
            if not 0 <= o.target < len(self.targets):
                raise ValueError(f"option {i}: target or node index out of range")
            t = self.targets[o.target]
            key = (o.node, o.mask, o.kind, o.victims, o.busy, t.gpus_per_node, t.same_domain)
            if key not in checked:
                self._validate_option(i, o, held)
                checked.add(key)

    def _validate_jobs_and_nodes(self) -> None:
        nn = len(self.nodes)
        for j, job in enumerate(self.jobs):
            if not 0 <= job.user < len(self.users):
                raise ValueError(f"job {j}: user index {job.user} out of range")
            for n, mask in job.gpus:
                if not 0 <= n < nn:
                    raise ValueError(f"job {j}: node index {n} out of range")
                if mask & self.nodes[n].free_mask:
                    raise ValueError(f"job {j}: holds GPUs node {n} reports free")
        for n, node in enumerate(self.nodes):
            if node.domain is not None and not 0 <= node.domain < len(self.domains):
                raise ValueError(f"node {n}: domain index {node.domain} out of range")
        if len(self.limits.user_caps) not in (0, len(self.users)):
            raise ValueError("limits.user_caps must have one entry per user")
        if len(self.limits.user_lost_caps) not in (0, len(self.users)):
            raise ValueError("limits.user_lost_caps must have one entry per user")
        capped = [c.user for c in self.limits.served_caps]
        if len(set(capped)) != len(capped):
            raise ValueError("limits.served_caps: one entry per target user")

    def _validate_option(self, i: int, o: OptionData, held: dict[tuple[int, int], int]) -> None:
        if not (0 <= o.target < len(self.targets) and 0 <= o.node < len(self.nodes)):
            raise ValueError(f"option {i}: target or node index out of range")
        node, target = self.nodes[o.node], self.targets[o.target]
        if not o.mask or o.mask >> node.gpu_count:
            raise ValueError(f"option {i}: GPU mask does not fit node {node.name}")
        if o.mask.bit_count() < target.gpus_per_node:
            raise ValueError(f"option {i}: fewer GPUs than target {target.job_id} needs")
        if target.same_domain and node.domain is None:
            raise ValueError(f"option {i}: target needs an NVLink domain, node has none")
        covered = node.free_mask
        for j in o.victims:
            if not 0 <= j < len(self.jobs):
                raise ValueError(f"option {i}: victim index {j} out of range")
            mine = held.get((j, o.node), 0)
            # A victim may hold none of the block's GPUs when the share needs the CPUs
            # or memory it frees on that node (see candidates.host_victims).
            if not mine:
                raise ValueError(f"option {i}: victim {j} holds no GPU on the node")
            covered |= mine
        if o.kind is OptionKind.REQUEUE and o.mask & ~covered:
            raise ValueError(f"option {i}: block has busy GPUs no victim frees")
        if o.kind is OptionKind.DRAIN and o.victims:
            raise ValueError(f"option {i}: a drain requeues nothing")
        if o.busy != (o.mask & ~node.free_mask).bit_count():
            raise ValueError(f"option {i}: busy count does not match the mask")

    @property
    def max_busy(self) -> int:
        """Upper bound of the objective's "busy GPUs used" term."""
        widest = max((n.gpu_count for n in self.nodes), default=0)
        return sum(t.nodes * widest for t in self.targets)
