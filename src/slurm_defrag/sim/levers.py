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

Policy names select a configuration (:func:`parse_mode`): ``slurm`` is Slurm alone;
``slurm+<lever>`` adds a lever from :data:`~slurm_defrag.packing.node_levers.LEVERS`, and
``slurm+<lever>/<N>`` applies it every N arrivals (Protocol A, which has no clock;
``slurm+<lever>@<M>/<N>``: each class's feature on at least M nodes,
``LeverSettings.min_members``; ``@<M>:c``: CPU-aware classes, :data:`CPU_BUCKETS`;
default :data:`DEFAULT_EVERY`; ``slurm+<lever>~seen/<N>``: an ``fgd-*`` lever weighs by
the mix of the jobs seen so far, as the service estimates it, ``~warm``: that estimate
full from the start; ``~short``: job_submit.lua's ``short_first`` on top, scarce jobs
first; ``~short-all``: every job by its limit, large and scarce ones first; ``~keep``
with either: the scarce nodes kept for the scarce jobs while they are in demand,
``~keep-always``: always; Protocol B, :func:`short_first_of`). Under a priority model
the boost is capped as ``plugins render`` caps it (issue #41 item 2,
:mod:`slurm_defrag.packing.queue_order`): at most 10 % of the site's priority range by
default, ``~cap<P>`` P %, ``~nocap`` the raw boost; without a priority model there is no
range and the raw boost stands (the simulator before #41). In Protocol B the cycle is
``EngineConfig.lever_interval`` seconds, the service's 60 s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from slurm_defrag.domain.cluster import ClusterSnapshot, Node, Partition
from slurm_defrag.domain.units import MILLI
from slurm_defrag.errors import InputError
from slurm_defrag.packing.fit_classes import Mix, TaskClass
from slurm_defrag.packing.node_levers import (
    LEVERS,
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
"""``~short-all``: tier 1 from 4 GPUs per node, Protocol B's large jobs."""
CPU_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
"""CPUs per node of the CPU-aware classes (``@<M>:c``): powers of two up to a node."""
DEFAULT_EVERY = 1
SEEN_MIX = "~seen"
WARM_MIX = "~warm"
"""Policy-name suffix of the lever: the mix of the jobs seen so far (:attr:`SlurmMode.seen_mix`)."""
SHORT_FIRST = "~short"
SHORT_FIRST_ALL = "~short-all"
"""Policy-name suffixes of job_submit.lua's queue order (:attr:`SlurmMode.short_first`)."""
KEEP_SCARCE = "~keep"
KEEP_ALWAYS = "~keep-always"
"""With a queue order: the scarce nodes kept for the scarce jobs (:attr:`SlurmMode.keep`),
under demand (:data:`KEEP_DEMAND`) or always."""
BOOST_CAP = re.compile(r"~cap(\d+)")
"""With a queue order: ``~cap<P>``, the boost bounded to P % of the priority range."""
UNCAPPED = "~nocap"
"""With a queue order under a priority model: the raw boost, as job_submit.lua set it
before the cap (issue #41's first measurements)."""
KEEP_DEMAND = 0.5
"""``~keep``'s ``--keep-scarce``: half the kept nodes' time (between openb ``default``'s
highest demand, 0.45, and ``multigpu50``'s 5th percentile, 0.57)."""


@dataclass(frozen=True)
class SlurmMode:
    """A ``slurm+<lever>/<N>`` policy name, parsed."""

    lever: LeverSettings
    every: int = DEFAULT_EVERY
    """Protocol A: arrivals per service cycle."""
    seen_mix: bool = False
    """``~seen``: an ``fgd-*`` lever weighs by the mix of the jobs seen so far, counted as
    the service counts them (:class:`~slurm_defrag.packing.workload_mix.MixEstimate`),
    instead of the whole trace's (which a site does not have)."""
    warm: bool = False
    """``~warm``: ``~seen`` whose estimate already holds as many jobs as it keeps, drawn
    from the workload before the run: a service that watched the cluster for a day
    before it routes (Protocol A starts from an empty cluster, so ``~seen`` alone
    starts from no job at all)."""
    short_first: str | None = None
    """``~short`` (``"scarce"``) or ``~short-all`` (``"all"``): the queue order
    job_submit.lua sets (:func:`short_first_of`)."""
    keep: float | None = None
    """``~keep`` (with ``~short*``): job_submit.lua keeps other jobs off the scarce node
    types (``--keep-scarce``, :func:`~slurm_defrag.packing.node_levers.mark_kept`) while the
    scarce jobs ask for :data:`KEEP_DEMAND` of their time; ``~keep-always``: always (0)."""
    boost_cap: float | None = None
    """``~cap<P>``: the boost bounded to P/100 of the site's priority range
    (:func:`short_first_of`); None: ``plugins render``'s default share."""
    uncapped: bool = False
    """``~nocap``: the raw boost, whatever the priority model."""


def parse_mode(policy: str) -> SlurmMode | None:
    """The slurm-mode configuration a policy name asks for; None for other policies."""
    head, _, rest = policy.partition("+")
    if head != SLURM_POLICY:
        return None
    if not rest:
        return SlurmMode(LeverSettings("none"))
    lever, _, every = rest.partition("/")
    m = _modifiers(lever)
    lever, _, members = m.lever.partition("@")
    members, cpu_aware, _ = members.partition(":c")
    _check_mode(policy, lever, members, m)
    mix = Mix((TaskClass(1, 1, MILLI, 1.0),))  # placeholder until with_mix() sets the real one
    n = _every(policy, every)
    mix_or_none = mix if lever.startswith("fgd-") else None
    buckets = CPU_BUCKETS if cpu_aware else ()
    settings = LeverSettings(
        lever, mix=mix_or_none, min_members=int(members or 1), cpu_buckets=buckets
    )
    return SlurmMode(settings, n, m.seen, m.warm, m.short, m.keep, m.cap, m.uncapped)


@dataclass(frozen=True, slots=True)
class _Modifiers:
    """The ``~`` modifiers of a lever name, and what is left of it (``lever@M:c``)."""

    lever: str
    cap: float | None
    uncapped: bool
    keep: float | None
    short: str | None
    warm: bool
    seen: bool


def _modifiers(lever: str) -> _Modifiers:
    # Stripped in this order: ~cap<P>, ~nocap, ~keep*, ~short*, then the mix suffixes.
    cap_match = BOOST_CAP.search(lever)
    cap = int(cap_match[1]) / 100 if cap_match else None
    lever = BOOST_CAP.sub("", lever)
    uncapped = UNCAPPED in lever
    lever = lever.replace(UNCAPPED, "")
    keep = 0.0 if KEEP_ALWAYS in lever else KEEP_DEMAND if KEEP_SCARCE in lever else None
    lever = lever.replace(KEEP_ALWAYS, "").replace(KEEP_SCARCE, "")
    short = "all" if SHORT_FIRST_ALL in lever else "scarce" if SHORT_FIRST in lever else None
    lever = lever.replace(SHORT_FIRST_ALL, "").replace(SHORT_FIRST, "")
    warm = lever.endswith(WARM_MIX)
    lever = lever.removesuffix(WARM_MIX)
    seen = warm or lever.endswith(SEEN_MIX)
    lever = lever.removesuffix(SEEN_MIX)
    return _Modifiers(lever, cap, uncapped, keep, short, warm, seen)


def _check_mode(policy: str, lever: str, members: str, m: _Modifiers) -> None:
    """Refuse a mode whose parts do not go together, naming the policy."""
    if members and (not members.isdigit() or int(members) < 1):
        raise ValueError(f"policy {policy!r}: @M must be a whole number of nodes >= 1")
    if m.keep is not None and m.short is None:
        raise ValueError(
            f"policy {policy!r}: {KEEP_SCARCE} needs {SHORT_FIRST} or {SHORT_FIRST_ALL}"
        )
    if m.cap is not None and (m.short is None or not 0 < m.cap <= 1 or m.uncapped):
        raise ValueError(
            f"policy {policy!r}: ~cap<P> needs {SHORT_FIRST} or {SHORT_FIRST_ALL} and P in "
            f"1-100 (and no {UNCAPPED})"
        )
    if m.uncapped and m.short is None:
        raise ValueError(f"policy {policy!r}: {UNCAPPED} needs {SHORT_FIRST} or {SHORT_FIRST_ALL}")
    if lever not in LEVERS:
        raise ValueError(f"policy {policy!r}: lever {lever!r}; choose from {', '.join(LEVERS)}")
    if m.seen and not lever.startswith("fgd-"):
        raise ValueError(f"policy {policy!r}: {SEEN_MIX} needs an fgd-* lever (a mix to weigh)")


def _every(policy: str, every: str) -> int:
    """``/N``: the lever is applied before every N-th arrival (default when absent)."""
    if not every:
        return DEFAULT_EVERY
    if not every.isdigit() or int(every) < 1:
        raise ValueError(f"policy {policy!r}: /N must be a whole number of arrivals >= 1")
    return int(every)


def short_first_of(
    mode: SlurmMode, priority: MultifactorConfig | None = None
) -> dict[str, object] | None:
    """The ``short_first`` table entry a mode asks for: scarce jobs (10 % of the GPU nodes
    or fewer hold them) first; with ``~short-all`` also large jobs (4 GPUs per node and
    more) before the rest, and every job by its time limit. Its ``cap``
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
    """The ``cap`` of the mode's ``short_first`` entry, in priority points: ``~cap<P>``'s
    share (else ``plugins render``'s default, 10 %) of the priority model's range (the sum
    of its ``PriorityWeight*``), so the order the script sets among boosted jobs is kept
    while fair-share and the other factors can outweigh it (issue #41 item 2). None (the
    raw boost): ``~nocap``, or no priority model (no range; the simulator before #41)."""
    if mode.uncapped:
        return None
    if priority is None:
        if mode.boost_cap is not None:
            raise InputError("~cap<P> bounds the boost by the priority range: it needs a priority")
        return None
    share = DEFAULT_CAP_SHARE if mode.boost_cap is None else mode.boost_cap
    return priority.priority_range().cap(share)


def mode_policies(levers: Sequence[str], every: Sequence[int] = (DEFAULT_EVERY,)) -> list[str]:
    """Policy names for ``--levers a,b --lever-every 1,60``: ``none`` is plain ``slurm``
    (once, whatever N), every other lever once per N."""
    out: list[str] = []
    for lever in levers:
        if lever == "none":
            name = SLURM_POLICY
            if name not in out:
                out.append(name)
            continue
        for n in every:
            name = f"{SLURM_POLICY}+{lever}/{n}"
            parse_mode(name)  # refuses an unknown lever or a bad N, naming it
            out.append(name)
    return out


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
        """``~seen``: the jobs seen so far (:meth:`observe`), the service's estimate."""
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
        """``~warm``: the estimate full before the run, with jobs drawn from ``pool``."""
        if self.seen is not None:
            for k, i in enumerate(rng.integers(0, len(pool), self.seen.keep)):
                self.observe(f"warm{k}", pool[int(i)])

    def observe(self, job_id: str, job: JobSpec) -> None:
        """A job the service will see in its next snapshot (``~seen`` only)."""
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
