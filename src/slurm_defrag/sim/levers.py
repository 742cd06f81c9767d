"""The service's packing levers, run on the simulator's state once per cycle.

The decision is the product's (:func:`slurm_defrag.packing.node_levers.compute_levers`); this
module only turns :class:`~slurm_defrag.sim.cluster_state.ClusterState` into the snapshot that
function reads and writes its answer back as node Weights and features — what the
service's :class:`~slurm_defrag.actuator.packing.Packer` does with ``scontrol update``.

The snapshot is the light variant of :mod:`~slurm_defrag.sim.snapshot_view`: nodes only
(the levers read no jobs), each GPU not wholly free shown busy with its used share in
``gpu_milli_used`` (Slurm's shard GRES counts), free CPUs rounded down. A node's
:class:`~slurm_defrag.domain.cluster.Node` is rebuilt only when its resources changed
(``ClusterState.version``), so a cycle costs one snapshot validation plus the lever.

A configuration is a :class:`SlurmMode`, built from a profile's typed fields
(:mod:`slurm_defrag.sim.configuration`): Slurm alone, or Slurm with a lever from
:data:`~slurm_defrag.packing.node_levers.LEVERS` applied every N arrivals (Protocol A,
which has no clock), each class's feature on at least M nodes, CPU-aware classes
(:data:`CPU_BUCKETS`), an ``fgd-*`` lever weighing by the mix of the jobs seen so far (as
the service estimates it, or that estimate full from the start), and job_submit.lua's
queue order on top (:func:`short_first_of`). Under a priority model the boost is capped as
``plugins render`` caps it (issue #41 item 2, :mod:`slurm_defrag.packing.queue_order`): at
most 10 % of the site's priority range by default; without a priority model there is no
range and the raw boost stands (the simulator before #41). In Protocol B the cycle is
``EngineConfig.lever_interval`` seconds, the service's 60 s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from slurm_defrag.domain.cluster import ClusterSnapshot, Node, Partition
from slurm_defrag.domain.units import MILLI
from slurm_defrag.errors import InputError
from slurm_defrag.packing.fit_classes import Mix, TaskClass
from slurm_defrag.packing.node_levers import (
    LeverSettings,
    compute_levers,
    is_ours,
    short_first_entry,
)
from slurm_defrag.packing.queue_order import DEFAULT_CAP_SHARE
from slurm_defrag.packing.workload_mix import MixEstimate
from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.frag import TaskType
from slurm_defrag.sim.model import JobSpec
from slurm_defrag.sim.multifactor import MultifactorConfig
from slurm_defrag.sim.snapshot_view import PARTITION, at, sim_node

SLURM_POLICY = "slurm"
SHORT_FIRST_SHARE = 0.1
"""``short_first`` in the simulator: scarce = at most 10 % of the GPU nodes can hold it."""
SHORT_FIRST_LARGE_GPUS = 4
"""``short_first_all``: tier 1 from 4 GPUs per node, Protocol B's large jobs."""
CPU_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
"""CPUs per node of the CPU-aware classes (``cpu_aware``): powers of two up to a node."""
DEFAULT_EVERY = 1
KEEP_DEMAND = 0.5
"""The one configuration's ``keep_scarce``: half the kept nodes' time (between openb ``default``'s
highest demand, 0.45, and ``multigpu50``'s 5th percentile, 0.57)."""


@dataclass(frozen=True)
class SlurmMode:
    """Slurm's own selection with a lever and job_submit.lua's queue order (a profile's
    ``[placement]`` and ``[job_submit]`` tables, :mod:`slurm_defrag.sim.configuration`)."""

    lever: LeverSettings
    every: int = DEFAULT_EVERY
    """Protocol A: arrivals per service cycle."""
    seen_mix: bool = False
    """``mix = "seen"``: an ``fgd-*`` lever weighs by the mix of the jobs seen so far, counted as
    the service counts them (:class:`~slurm_defrag.packing.workload_mix.MixEstimate`),
    instead of the whole trace's (which a site does not have)."""
    warm: bool = False
    """``mix = "warm"``: ``seen`` whose estimate already holds as many jobs as it keeps, drawn
    from the workload before the run: a service that watched the cluster for a day
    before it routes (Protocol A starts from an empty cluster, so ``seen`` alone
    starts from no job at all)."""
    short_first: str | None = None
    """``"scarce"`` (``--short-first``) or ``"all"`` (and ``--short-first-all``): the
    queue order job_submit.lua sets (:func:`short_first_of`)."""
    keep: float | None = None
    """``keep_scarce`` (with a queue order): job_submit.lua keeps other jobs off the scarce node
    types (``--keep-scarce``, :func:`~slurm_defrag.packing.node_levers.mark_kept`) while the
    scarce jobs ask for this share of their time (:data:`KEEP_DEMAND`); 0: always."""
    boost_cap: float | None = None
    """``boost_cap``: the boost bounded to this share of the site's priority range
    (:func:`short_first_of`); None: ``plugins render``'s default share."""
    uncapped: bool = False
    """``uncapped_boost``: the raw boost, whatever the priority model."""


def short_first_of(
    mode: SlurmMode, priority: MultifactorConfig | None = None
) -> dict[str, object] | None:
    """The ``short_first`` table entry a mode asks for: scarce jobs (10 % of the GPU nodes
    or fewer hold them) first; with ``"all"`` also large jobs (4 GPUs per node and
    more) before the rest, and every job by its time limit (``"all"``). Its ``cap``
    (:func:`boost_cap`) is the one ``plugins render`` would write for ``priority``."""
    if mode.short_first is None:
        return None
    cap = boost_cap(mode, priority)
    if mode.short_first == "all":
        return short_first_entry(
            SHORT_FIRST_SHARE,
            all_jobs=True,
            large_gpus=SHORT_FIRST_LARGE_GPUS,
            keep=mode.keep,
            cap=cap,
        )
    return short_first_entry(SHORT_FIRST_SHARE, keep=mode.keep, cap=cap)


def boost_cap(mode: SlurmMode, priority: MultifactorConfig | None) -> int | None:
    """The ``cap`` of the mode's ``short_first`` entry, in priority points: ``boost_cap``'s
    share (else ``plugins render``'s default, 10 %) of the priority model's range (the sum
    of its ``PriorityWeight*``), so the order the script sets among boosted jobs is kept
    while fair-share and the other factors can outweigh it (issue #41 item 2). None (the
    raw boost): ``uncapped_boost``, or no priority model (no range; the simulator before #41)."""
    if mode.uncapped:
        return None
    if priority is None:
        if mode.boost_cap is not None:
            raise InputError(
                "boost_cap bounds the boost by the priority range: it needs a priority"
            )
        return None
    share = DEFAULT_CAP_SHARE if mode.boost_cap is None else mode.boost_cap
    return priority.priority_range().cap(share)


def mix_of(types: Sequence[TaskType]) -> Mix:
    """The FGD measure's task types as the product's mix (CPUs rounded up to whole CPUs,
    as a Slurm request states them)."""
    return Mix(
        tuple(
            TaskClass(-(-t.cpu_milli // MILLI), t.num_gpu, t.gpu_milli, t.weight, t.gpu_models)
            for t in types
        )
    )


def task_class(job: JobSpec) -> TaskClass:
    """A job's request as one type of the mix (whole CPUs, as Slurm states them)."""
    return TaskClass(-(-job.cpu_milli // MILLI), job.num_gpu, job.gpu_milli, 1.0, job.gpu_models)


def with_mix(mode: SlurmMode, types: Sequence[TaskType]) -> SlurmMode:
    """``mode`` with the workload mix its lever needs (``fgd-*``); unchanged otherwise."""
    if not mode.lever.fgd:
        return mode
    return replace(mode, lever=replace(mode.lever, mix=mix_of(types)))


class SimLevers:
    """Applies one lever configuration to a cluster state, cycle after cycle."""

    def __init__(
        self, state: ClusterState, settings: LeverSettings, *, seen_mix: bool = False
    ) -> None:
        self.state = state
        self.settings = settings
        self.seen = MixEstimate() if seen_mix else None
        """``mix = "seen"``: the jobs seen so far (:meth:`observe`), the service's estimate."""
        self.originals = {s.name: s.weight for s in state.nodes}
        self._index = {s.name: i for i, s in enumerate(state.nodes)}
        self._nodes: list[Node | None] = [None] * state.size
        self._seen = [-1] * state.size
        self.cycles = 0
        self.route: Mapping[str, object] | None = None
        """``fgd-route``: the last cycle's table for job_submit.lua."""
        self.changes = 0
        """Weight and feature updates made (each an ``scontrol update`` on a real cluster)."""

    def _node(self, n: int) -> Node:
        v = int(self.state.version[n])
        node = self._nodes[n]
        if node is None or self._seen[n] != v:
            node = _node(self.state, n)
            self._nodes[n], self._seen[n] = node, v
        return node

    def snapshot(self, now: float) -> ClusterSnapshot:
        nodes = tuple(self._node(n) for n in range(self.state.size))
        return ClusterSnapshot(
            cluster="simulator",
            taken_at=at(now),
            source="simulator",
            nodes=nodes,
            partitions=(Partition(name=PARTITION, nodes=tuple(n.name for n in nodes)),),
        )

    def warm_up(self, pool: Sequence[JobSpec], rng: np.random.Generator) -> None:
        """``mix = "warm"``: the estimate full before the run, with jobs drawn from ``pool``."""
        if self.seen is not None:
            for k, i in enumerate(rng.integers(0, len(pool), self.seen.keep)):
                self.observe(f"warm{k}", pool[int(i)])

    def observe(self, job_id: str, job: JobSpec) -> None:
        """A job the service will see in its next snapshot (``mix = "seen"`` only)."""
        if self.seen is not None:
            self.seen.observe([(job_id, task_class(job))])

    def apply(self, now: float = 0.0) -> int:
        """One service cycle: compute the levers and set them; returns updates made."""
        self.cycles += 1
        if self.settings.lever == "none":
            return 0
        settings = self.settings
        if self.seen is not None:
            mix = self.seen.mix()
            if mix is None:  # no job seen yet: the service writes no route either
                self.route = None
                return 0
            settings = replace(settings, mix=mix)
        want = compute_levers(self.snapshot(now), settings, self.originals)
        self.route = want.route
        changed = 0
        for name, w in want.weights.items():
            changed += self.state.set_weight(self._index[name], w)
        for name, ours in want.features.items():
            n = self._index[name]
            own = frozenset(f for f in self.state.features[n] if not is_ours(f))
            changed += self.state.set_features(n, own | ours)
        self.changes += changed
        return changed


def _node(state: ClusterState, n: int) -> Node:
    spec = state.nodes[n]
    left = state.gpu_left[n]
    used = tuple(MILLI - int(left[g]) for g in range(spec.gpus))
    busy = any(used) or state.cpu_left[n] < state.cpu_cap[n]
    return sim_node(
        state,
        n,
        busy=busy,
        gpus_used=frozenset(g for g, u in enumerate(used) if u),
        gpu_milli_used=used,
        weight=int(state.weight[n]),
    )
