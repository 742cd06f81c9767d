"""FGD's fragmentation rise per request class, on one node's free resources (pure Python).

The measure of Weng et al. (USENIX ATC '23; the simulator's ``sim/frag.py`` is the
vectorised twin): for a task type m, the fragment of a node is all its free milli-GPUs if m
cannot run there (CPU, GPU count, model), else the free capacity of GPUs with less than m's
share left; the node's fragmentation is the expectation over the workload mix. The
*rise* for a request class is F(after) - F(before) if one request of the class started
on the node where Slurm would put it: whole GPUs are interchangeable for the measure, and
a shard request takes the lowest-indexed GPU with room, as cons_tres does.

Nodes are described by a hashable :data:`NodeFree` so that rises are cached across
cycles: from one cycle to the next few nodes change, and idle nodes of one kind share one
entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

NodeFree = tuple[tuple[int, ...], int, str | None]
"""(free milli-GPUs per GPU, free CPUs, GPU model)."""


@dataclass(frozen=True, slots=True)
class TaskClass:
    """One kind of request in the mix: ``gpus`` GPUs of ``milli`` each (shares: gpus=1)."""

    cpus: int
    gpus: int
    milli: int
    weight: float
    models: frozenset[str] | None = None

    def runs_on(self, node: NodeFree) -> bool:
        free, cpus, model = node
        if cpus < self.cpus or (self.models is not None and model not in self.models):
            return False
        return sum(f >= self.milli for f in free) >= self.gpus


@dataclass(frozen=True)
class Mix:
    """The workload's request classes (weights need not sum to 1; they are normalised)."""

    types: tuple[TaskClass, ...]

    def __post_init__(self) -> None:
        if not self.types or sum(t.weight for t in self.types) <= 0:
            raise ValueError("a workload mix needs at least one type with a positive weight")


@lru_cache(maxsize=1 << 16)
def frag(node: NodeFree, mix: Mix) -> float:
    """F_n in milli-GPUs: the expected free capacity the mix's types cannot use."""
    free = node[0]
    total = sum(free)
    if total == 0:
        return 0.0
    wsum = sum(t.weight for t in mix.types)
    usable = 0.0
    for t in mix.types:
        if t.gpus and t.runs_on(node):
            usable += t.weight * sum(f for f in free if f >= t.milli)
    return total - usable / wsum


def after(node: NodeFree, req: TaskClass) -> NodeFree | None:
    """The node once ``req`` started where cons_tres puts it; None if it does not fit."""
    if not req.runs_on(node):
        return None
    free = list(node[0])
    need = req.gpus
    for g, f in enumerate(free):
        if need and f >= req.milli:
            free[g] -= req.milli
            need -= 1
    return (tuple(free), node[1] - req.cpus, node[2])


@lru_cache(maxsize=1 << 18)
def rise(node: NodeFree, req: TaskClass, mix: Mix) -> float | None:
    """FGD rise of starting ``req`` on the node (None: it does not fit)."""
    nxt = after(node, req)
    if nxt is None:
        return None
    return frag(nxt, mix) - frag(node, mix)
