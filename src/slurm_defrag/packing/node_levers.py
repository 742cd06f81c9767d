"""Packing levers Slurm executes: node Weights and node features, from one snapshot.

Pure: a :class:`~slurm_defrag.domain.cluster.ClusterSnapshot` in, the weights and the
slurm-defrag features every GPU node should have out. The service applies the result with
``scontrol update NodeName=..`` (:class:`slurm_defrag.actuator.packing.Packer`), the
simulator applies it to its state (:mod:`slurm_defrag.sim.levers`): the same code decides
in both, once per service cycle. Slurm does the placing itself, with cons_tres's rule
(lowest Weight first, then node order) and ``--prefer`` as a soft constraint, which
job_submit.lua adds at submit (``pack`` entry of defrag_nodes.lua, :func:`pack_table`).

Levers (:data:`LEVERS`):

* ``none`` — nothing (Slurm's first fit).
* ``idle-bump`` — the original lever: GPU nodes with every GPU free get ``Weight +
  bump``, so small jobs land beside running work.
* ``weight-tiers`` — every GPU node's Weight becomes ``original x TIER_SPAN + tier``,
  the tier rising with the node's free GPU capacity (milli-GPUs / ``TIER_STEP``) and
  wholly idle nodes last: cons_tres then fills the fullest node where a job fits (best
  fit on GPUs) and keeps empty nodes whole, while the admin's own weights still come
  first. GPU-less nodes keep their weights.
* ``fit-features`` — per request class (k whole GPUs for k in ``FIT_SIZES``; a shared
  GPU, i.e. shards) the nodes where such a request fits with the least GPU capacity left
  free get the feature ``defrag_fit<k>`` (``defrag_fitshard``); job_submit.lua turns a
  one-node k-GPU request into ``--prefer=defrag_fit<k>``. A job asking for no GPU (CPUs
  only) has its class too, ``defrag_fitcpu``: the nodes with the fewest whole free GPUs
  (its CPUs there strand no GPU). Weights are left alone.
* ``fit-tiers`` — both.
* ``size-weights`` — every GPU node's Weight becomes ``original x TIER_SPAN + its GPU
  count``: within the admin's order, Slurm fills the nodes with fewer GPUs first, so small
  jobs stay off the 8-GPU nodes while smaller nodes have room, and those empty for the
  whole-node jobs (Protocol B: 8-GPU jobs carry nearly all of the large jobs' wait).
* ``shape-weights`` — ``size-weights`` that also orders nodes of one GPU count by CPUs,
  then memory: the Weight's low part is the node's rank by (GPUs, CPUs, memory) among the
  GPU nodes. The few nodes with the most CPUs or memory come last, so work that fits
  elsewhere stays off them and the jobs only they can hold (openb: 8-GPU jobs asking for
  more than 96 CPUs or 384 GiB) find them free.
* ``fit-size`` — ``fit-features`` with ``size-weights``: among a class's tagged nodes,
  and when a job falls back, the smaller node first.
* ``fgd-features`` — the fit classes chosen by FGD instead of leftover capacity: per
  class (k whole GPUs, or a share of S shards for each share size of the workload mix)
  the nodes where one request of the class (the mix's typical CPU count for it) raises
  FGD fragmentation least, in steps of ``RISE_STEP`` milli-GPUs
  (:mod:`~slurm_defrag.packing.fit_classes`); needs ``LeverSettings.mix``. CPU-only jobs
  (``defrag_fitcpu``) count most: in Protocol A, packing every GPU job the FGD way but
  leaving CPU-only jobs to first fit leaves 7.7 % of the GPUs unallocated, worse than
  first fit everywhere (5.5 %): their CPUs strand the GPUs beside them
  (bench/sim_lever_ceiling.py).
* ``fgd-tiers`` — ``fgd-features`` and ``weight-tiers``: Slurm's choice among the tagged
  nodes is then the partly used node with the least free capacity, then node order —
  the tie-breaks of the simulator's ``packing`` policy, executed by cons_tres.
* ``fgd-route`` — a decision per job instead of per cycle: every node carries its own
  feature (:func:`route_feature`), and the cycle's free resources of every node go to
  job_submit.lua (:func:`route_table`), which gives each one-node job ``--prefer=`` the
  node ``packing`` would choose on its copy of the table and takes the job off that copy.
  Per-cycle levers lose ``packing``'s re-ranking after every job (docs/benchmarks.md,
  "Where the levers lose against packing"); this keeps it. The service writes the table
  to its ``route_file`` every cycle (:class:`~slurm_defrag.actuator.route_file.RouteFile`).
* ``fgd-route-score`` — ``fgd-route`` with FGD's own rule in the script (its integer
  score, ties by a fixed hash order of the nodes) instead of ``packing``'s keys.
* ``fgd-route-shape`` — ``fgd-route-score`` with ``shape-weights``: FGD's ties go to the
  node first in the shape order (fewer GPUs, CPUs, memory), and so does Slurm when it
  falls back (Protocol B: keep the largest nodes for the jobs only they can hold).

What a node offers comes from the snapshot: whole free GPUs (no owner), free CPUs, and,
for shards, ``Node.gpu_milli_used`` (milli-GPUs used per GPU). Without that field a GPU is
wholly free or wholly busy and the shard class is tagged on nodes with a free GPU.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from slurm_defrag.domain.cluster import ClusterSnapshot, Node
from slurm_defrag.domain.units import MILLI
from slurm_defrag.errors import InputError
from slurm_defrag.packing.fit_classes import Mix, NodeFree, TaskClass, rise

LEVERS = (
    "none",
    "idle-bump",
    "weight-tiers",
    "fit-features",
    "fit-tiers",
    "size-weights",
    "shape-weights",
    "fit-size",
    "fgd-features",
    "fgd-tiers",
    "fgd-route",
    "fgd-route-score",
    "fgd-route-shape",
)
IDLE_BUMP = "idle-bump"
"""The original lever (the service's default)."""
SIZE_LEVERS = ("size-weights", "shape-weights", "fit-size", "fgd-route-shape")
"""Levers whose Weights order nodes by GPU count (fewer first)."""
FIT_PREFIX = "defrag_fit"
SHARD_FEATURE = FIT_PREFIX + "shard"
CPU_FEATURE = FIT_PREFIX + "cpu"
ROUTE_PREFIX = "defrag_at_"
"""``fgd-route``: every node's own feature, ``defrag_at_<node name>`` (characters other
than letters, digits and ``_`` as ``_``), which job_submit.lua names in ``--prefer``."""
FIT_SIZES = (1, 2, 4, 8)
TIER_SPAN = 4096
"""Weight = original x TIER_SPAN + tier: the admin's order first, ours within it."""
MAX_WEIGHT = 0xFFFFFFFE
"""Slurm's largest node Weight: a uint32, and slurm.conf's INFINITE (0xFFFFFFFF) is read
as one less (``read_config.c``); ``scontrol update`` refuses anything above 32 bits."""
TIER_STEP = 10
"""milli-GPUs of free capacity per Weight tier (16 GPUs -> at most 1,600 tiers)."""
IDLE_TIER = 2048
"""Tier of a node with every GPU free: after every partly used node."""
RISE_STEP = 40.0
"""Width (milli-GPUs) of the FGD rise classes: rises within one step count as equal, so
the weights break the tie (the simulator's ``packing`` policy uses the same step)."""
SHARDS_PER_GPU = 1000
"""Shards per GPU (gres.conf ``Name=shard Count=`` / GPUs): S shards are S milli-GPUs, so
the trace's shares (multiples of 1/1000) are exact."""


@dataclass(frozen=True)
class LeverSettings:
    lever: str = "none"
    bump: int = 1000
    """``idle-bump``: Weight added to wholly idle GPU nodes."""
    fit_sizes: tuple[int, ...] = FIT_SIZES
    mix: Mix | None = None
    """``fgd-*``: the workload's request classes (the FGD measure's distribution)."""
    cpu_buckets: tuple[int, ...] = ()
    """CPU-aware classes: each GPU class is split by CPUs per node, the feature
    ``<class>c<B>`` on the best nodes with at least B CPUs free, and job_submit.lua
    gives a job the bucket B = the smallest one >= its CPUs (none above the largest).
    Empty: one class per GPU request, whatever its CPUs."""
    min_members: int = 1
    """Each class's feature goes to at least this many nodes (the best ones; ties kept),
    so that one cycle's arrivals and jobs larger than the class's typical request still
    find a preferred node. 1: the best nodes only."""

    def __post_init__(self) -> None:
        if self.lever not in LEVERS:
            raise ValueError(f"lever {self.lever!r}: choose from {', '.join(LEVERS)}")
        if self.fgd and self.mix is None:
            raise ValueError(f"lever {self.lever}: needs the workload mix")

    @property
    def weights(self) -> bool:
        return self.lever in (
            "idle-bump",
            "weight-tiers",
            "fit-tiers",
            "fgd-tiers",
            *SIZE_LEVERS,
        )

    @property
    def features(self) -> bool:
        return self.lever in (
            "fit-features",
            "fit-tiers",
            "fit-size",
            "fgd-features",
            "fgd-tiers",
            "fgd-route",
            "fgd-route-score",
            "fgd-route-shape",
        )

    @property
    def route(self) -> bool:
        """job_submit.lua picks one node per job from this cycle's table (:func:`route_table`)."""
        return self.lever.startswith("fgd-route")

    @property
    def fgd(self) -> bool:
        return self.lever.startswith("fgd-")

    @cached_property
    def classes(self) -> dict[str, TaskClass]:
        """``fgd-*``: feature -> the request that stands for its class."""
        if self.mix is None:
            return {}
        out: dict[str, TaskClass] = {}
        for k in self.fit_sizes:
            of_k = [t for t in self.mix.types if t.gpus == k and t.milli == MILLI]
            out[f"{FIT_PREFIX}{k}"] = TaskClass(_median_cpus(of_k), k, MILLI, 1.0)
        for s in self.shard_sizes:
            milli = s * MILLI // SHARDS_PER_GPU
            of_s = [t for t in self.mix.types if t.gpus == 1 and t.milli == milli]
            out[f"{SHARD_FEATURE}{s}"] = TaskClass(_median_cpus(of_s), 1, milli, 1.0)
        if self.cpu_buckets:
            out = {
                f"{feature}c{b}": TaskClass(b, req.gpus, req.milli, 1.0)
                for feature, req in out.items()
                for b in self.cpu_buckets
            }
        cpu_only = [t for t in self.mix.types if t.gpus == 0]
        if cpu_only:
            out[CPU_FEATURE] = TaskClass(_median_cpus(cpu_only), 0, 0, 1.0)
        return out

    @property
    def shard_sizes(self) -> tuple[int, ...]:
        """``fgd-*``: the share sizes (in shards) of the mix, ascending."""
        if self.mix is None:
            return ()
        return tuple(
            sorted(
                {t.milli * SHARDS_PER_GPU // MILLI for t in self.mix.types if 0 < t.milli < MILLI}
            )
        )


def _median_cpus(types: list[TaskClass]) -> int:
    """The weighted median CPU count of these types (1 when there are none)."""
    if not types:
        return 1
    half = sum(t.weight for t in types) / 2
    acc = 0.0
    for t in sorted(types, key=lambda t: t.cpus):
        acc += t.weight
        if acc >= half:
            return t.cpus
    return types[-1].cpus


@dataclass(frozen=True)
class NodeLevers:
    """What every managed node should look like after this cycle."""

    weights: Mapping[str, int]
    """GPU node -> Weight (only when the lever sets weights)."""
    features: Mapping[str, frozenset[str]]
    """GPU node (``fgd-route``: every node) -> the slurm-defrag features it should carry
    (:func:`is_ours`); the node's own features are kept beside them (only when the lever
    sets features)."""
    route: Mapping[str, object] | None = None
    """``fgd-route``: the ``route`` entry of defrag_nodes.lua (:func:`route_table`)."""


SHORT_FIRST_SPAN = 10080
"""job_submit.lua's ``short_first`` boosts a job's priority by its tier times this plus
this minus its time limit in minutes (a week: a limit of a week or more, or none, adds
nothing), scaled into ``[0, cap]`` by the table's ``cap``
(:mod:`slurm_defrag.packing.queue_order`)."""


KEEP_WINDOW_MIN = 360
"""How far back job_submit.lua looks at the scarce submissions to decide whether to keep
their nodes (``short_first.keep.window``, minutes)."""


def short_first_entry(
    share: float,
    *,
    all_jobs: bool = False,
    large_gpus: int | None = None,
    keep: float | None = None,
    cap: int | None = None,
) -> dict[str, object]:
    """The ``short_first`` entry of defrag_nodes.lua (the queue order job_submit.lua sets):
    tier 2 for a one-node GPU job at most ``share`` of the GPU nodes can hold, tier 1 for
    ``large_gpus`` GPUs per node or more, the rest only with ``all_jobs``; with ``keep``
    (a demand: the share of the kept nodes' time the scarce jobs of the last
    :data:`KEEP_WINDOW_MIN` minutes ask for; 0: always) the other jobs are kept off the
    node types :func:`mark_kept` marks. ``cap``: the largest boost in priority points
    (:mod:`~slurm_defrag.packing.queue_order`); None: the raw boost."""
    if not 0 < share <= 1:
        raise InputError(f"--short-first: {share} is not a share of nodes in (0, 1]")
    if large_gpus is not None and large_gpus < 1:
        raise InputError(f"--large-first: {large_gpus} is not a GPU count (1 or more)")
    entry: dict[str, object] = {"share": share, "span": SHORT_FIRST_SPAN}
    if all_jobs:
        entry["all"] = True
    if large_gpus is not None:
        entry["large_gpus"] = large_gpus
    if cap is not None:
        entry["cap"] = cap
    if keep is not None:
        if not 0 <= keep <= 1000:
            raise InputError(f"--keep-scarce: {keep} is not a demand (0 or more, a share of time)")
        entry["keep"] = {"demand": keep, "window": KEEP_WINDOW_MIN}
    return entry


def mark_kept(types: Sequence[dict[str, Any]], share: float) -> list[str]:
    """Mark (``kept = True``) one partition's node types that job_submit.lua keeps for the
    jobs only they can hold; returns their hosts. A type is kept when a job asking for all
    of its GPUs, CPUs and memory would fit at most ``share`` of the partition's GPU nodes
    (the script's tier 2), and a type that is not scarce has as many GPUs: the big-CPU or
    big-memory variant of a common node, whatever its GPU model. Scarcity here ignores
    models, so a type that is rare only by its model is never kept (other jobs would leave
    it idle; its own jobs find it by asking for the model), nor a type the table gives no
    CPUs or memory for."""
    gpu = [t for t in types if t["gpus"] > 0]
    total = sum(int(t["nodes"]) for t in gpu)

    def holds(u: Mapping[str, Any], t: Mapping[str, Any]) -> bool:
        return bool(
            u["gpus"] >= t["gpus"]
            and u.get("cpus", t["cpus"]) >= t["cpus"]
            and u.get("mem", t["mem"]) >= t["mem"]
        )

    scarce = [
        "cpus" in t
        and "mem" in t
        and sum(int(u["nodes"]) for u in gpu if holds(u, t)) <= share * total
        for t in gpu
    ]
    common_gpus = {t["gpus"] for t, s in zip(gpu, scarce, strict=True) if not s}
    kept = []
    for t, s in zip(gpu, scarce, strict=True):
        if s and t["gpus"] in common_gpus:
            t["kept"] = True
            kept.append(str(t["hosts"]))
    return kept


def is_ours(feature: str) -> bool:
    """A feature slurm-defrag sets and removes (never one of the admin's)."""
    return feature.startswith((FIT_PREFIX, ROUTE_PREFIX))


def route_feature(node: str) -> str:
    """The node's own feature under ``fgd-route`` (:data:`ROUTE_PREFIX`)."""
    return ROUTE_PREFIX + re.sub(r"[^A-Za-z0-9_]", "_", node)


def pack_table(settings: LeverSettings) -> dict[str, object] | None:
    """The ``pack`` entry of defrag_nodes.lua for the fit-class features (None: none).

    job_submit.lua gives a one-node job of k GPUs, k in ``fit_sizes``, the
    ``--prefer=<fit_prefix><k>``, a job asking only for shards ``--prefer=<shard>``, and
    a one-node job asking for no GPU ``--prefer=<cpu_feature>``.
    """
    if not settings.features or settings.route:  # fgd-route: the route entry instead
        return None
    table: dict[str, object] = {
        "fit_prefix": FIT_PREFIX,
        "fit_sizes": list(settings.fit_sizes),
        "shard_feature": SHARD_FEATURE,
        "cpu_feature": CPU_FEATURE,
    }
    if settings.fgd:
        # a job of S shards prefers defrag_fitshard<T>, T the smallest size >= S
        table["shard_sizes"] = list(settings.shard_sizes)
    if settings.cpu_buckets:
        # ... and with the suffix c<B>, B the smallest bucket >= the job's CPUs per node
        table["cpu_buckets"] = list(settings.cpu_buckets)
    return table


@dataclass(frozen=True)
class _Free:
    whole: int
    """GPUs with no owner."""
    milli: int
    """Free capacity in milli-GPUs (whole free GPUs plus what shards leave)."""
    best_share: int
    """Smallest free share (milli) of a partly used GPU; MILLI when none is partly used."""
    cpus: int | None
    idle: bool
    vector: NodeFree
    """For the FGD measure: free milli per GPU, free CPUs, model."""


def _free(node: Node, owners: tuple[str | None, ...]) -> _Free:
    per_gpu = [MILLI if o is None else 0 for o in owners]
    for g, used in enumerate(node.gpu_milli_used):
        if owners[g] is not None and 0 < used < MILLI:
            per_gpu[g] = MILLI - used
    whole = sum(o is None for o in owners)
    partial = [f for f in per_gpu if 0 < f < MILLI]
    idle = whole == node.gpu_count and (node.cpus is None or node.cpus_alloc == 0)
    cpus = node.cpus_free
    vector = (tuple(per_gpu), cpus if cpus is not None else 1 << 20, node.gpu_model)
    return _Free(whole, sum(per_gpu), min(partial, default=MILLI), cpus, idle, vector)


def _base(node: Node, originals: Mapping[str, int]) -> int:
    return originals.get(node.name, node.weight if node.weight is not None else 1)


def _admin_order(nodes: list[Node], originals: Mapping[str, int]) -> dict[str, int]:
    """Each GPU node's own Weight, or its rank among them (1 = lightest) when
    ``Weight x TIER_SPAN`` would pass Slurm's 32-bit limit: Slurm only compares weights,
    so the rank keeps the admin's order where the product would be refused."""
    bases = {n.name: _base(n, originals) for n in nodes}
    if max(bases.values(), default=0) <= (MAX_WEIGHT - (TIER_SPAN - 1)) // TIER_SPAN:
        return bases
    rank = {w: i for i, w in enumerate(sorted(set(bases.values())), start=1)}
    return {name: rank[w] for name, w in bases.items()}


def _gpu_count(node: Node) -> int:
    return node.gpu_count


def _shape(node: Node) -> tuple[int, int, int]:
    return (node.gpu_count, node.cpus or 0, node.memory_mb or 0)


def _shape_rank(nodes: list[Node]) -> Callable[[Node], int]:
    """A node's rank (1 = smallest) by (GPUs, CPUs, memory) among ``nodes``: a cluster has
    few distinct shapes, so the rank fits the tier's 12 bits where MiB would not."""
    rank = {shape: i for i, shape in enumerate(sorted({_shape(n) for n in nodes}), start=1)}
    return lambda node: rank[_shape(node)]


def _tier(f: _Free) -> int:
    return IDLE_TIER if f.idle else min(IDLE_TIER - 1, f.milli // TIER_STEP)


def _best(keys: Mapping[str, tuple[object, ...]], at_least: int) -> set[str]:
    """The nodes with the best key, widened to the best ``at_least`` nodes (ties kept).

    A set of one node fills with the cycle's first arrival, and a job that does not fit
    its class's tightest node (more CPUs than the class's typical request) falls back to
    Slurm's plain order: measured in Protocol A, most jobs then fell back.
    """
    if not keys:
        return set()
    ordered = sorted(keys.values())
    cut = ordered[min(max(1, at_least), len(ordered)) - 1]
    return {name for name, key in keys.items() if key <= cut}


def _fit_sets(free: Mapping[str, _Free], settings: LeverSettings) -> dict[str, set[str]]:
    """Feature -> nodes where that class fits leaving the least free capacity.

    Partly used nodes before idle ones (keep whole nodes whole); among them the least
    capacity left after the request, in whole GPUs: ties are many, so a cycle's feature
    set has room for several arrivals. A node with no free CPU fits nothing.
    """
    n = settings.min_members
    out: dict[str, set[str]] = {}
    # (suffix, CPUs the class needs free): one class without buckets (at least one CPU:
    # a node with none fits nothing), else one per bucket
    buckets = [(f"c{b}", b) for b in settings.cpu_buckets] or [("", 1)]
    for suffix, need in buckets:
        for k in settings.fit_sizes:
            keys = {
                name: (f.idle, (f.milli - k * MILLI) // MILLI)
                for name, f in free.items()
                if f.whole >= k and (f.cpus is None or f.cpus >= need)
            }
            out[f"{FIT_PREFIX}{k}{suffix}"] = _best(keys, n)
        # Shards: a partly used GPU with the least room first; else the fullest node with
        # a free GPU (opening a GPU there rather than on an emptier node).
        shard = {
            name: (f.best_share, f.idle, f.milli // MILLI)
            for name, f in free.items()
            if (f.cpus is None or f.cpus >= need) and not (f.whole == 0 and f.best_share == MILLI)
        }
        out[f"{SHARD_FEATURE}{suffix}"] = _best(shard, n)
    # CPUs only: where its CPUs strand the fewest whole GPUs; partly used before idle.
    cpu = {name: (f.whole, f.idle) for name, f in free.items() if f.cpus != 0}
    out[CPU_FEATURE] = _best(cpu, n)
    return out


def _fgd_sets(free: Mapping[str, _Free], settings: LeverSettings) -> dict[str, set[str]]:
    """Feature -> nodes where the class's request raises FGD least (in RISE_STEP steps)."""
    assert settings.mix is not None
    out: dict[str, set[str]] = {}
    for feature, req in settings.classes.items():
        keys: dict[str, tuple[object, ...]] = {}
        for name, f in free.items():
            r = rise(f.vector, req, settings.mix)
            if r is not None:
                keys[name] = (math.floor(r / RISE_STEP + 1e-9),)
        out[feature] = _best(keys, settings.min_members)
    return out


def compute_levers(
    snapshot: ClusterSnapshot,
    settings: LeverSettings,
    originals: Mapping[str, int] | None = None,
) -> NodeLevers:
    """Desired weights and slurm-defrag features of every available GPU node.

    ``originals``: node -> Weight before slurm-defrag changed it (the actuator's record);
    a node not in it counts its current Weight as its own.
    """
    orig = originals or {}
    owners = snapshot.gpu_owners
    nodes = [n for n in snapshot.nodes if n.gpu_count > 0]
    free = {n.name: _free(n, owners[n.name]) for n in nodes if n.available}
    weights = _lever_weights(settings, nodes, free, orig)
    if settings.route:
        return _route_levers(snapshot, settings, weights)
    features: dict[str, frozenset[str]] = {}
    if settings.features:
        tagged: dict[str, set[str]] = {n.name: set() for n in nodes}
        sets = _fgd_sets(free, settings) if settings.fgd else _fit_sets(free, settings)
        for feature, members in sets.items():
            for name in members:
                tagged[name].add(feature)
        features = {name: frozenset(fs) for name, fs in tagged.items()}
    return NodeLevers(weights, features)


def _lever_weights(
    settings: LeverSettings, nodes: list[Node], free: Mapping[str, _Free], orig: Mapping[str, int]
) -> dict[str, int]:
    """The Weight the lever wants for each GPU node (none for a lever that sets no Weight)."""
    weights: dict[str, int] = {}
    if settings.lever == "idle-bump":
        for n in nodes:
            f = free.get(n.name)
            bumped = _base(n, orig) + (settings.bump if f and f.idle else 0)
            weights[n.name] = min(bumped, MAX_WEIGHT)
    elif settings.lever in SIZE_LEVERS:
        order = _admin_order(nodes, orig)
        by_shape = settings.lever in ("shape-weights", "fgd-route-shape")
        size = _shape_rank(nodes) if by_shape else _gpu_count
        for n in nodes:
            weights[n.name] = order[n.name] * TIER_SPAN + min(size(n), TIER_SPAN - 1)
    elif settings.weights:
        order = _admin_order(nodes, orig)
        for n in nodes:
            f = free.get(n.name)
            tier = IDLE_TIER if f is None else _tier(f)
            weights[n.name] = order[n.name] * TIER_SPAN + tier
    return weights


def _route_levers(
    snapshot: ClusterSnapshot, settings: LeverSettings, weights: dict[str, int]
) -> NodeLevers:
    """The fgd-route levers: a route feature per routed node and the script's table."""
    assert settings.mix is not None
    owners = snapshot.gpu_owners
    # every node, GPU-less ones too: a CPU-only job raises no fragmentation there
    every = {n.name: _free(n, owners.get(n.name, ())) for n in snapshot.nodes if n.available}
    routed = _routed(list(snapshot.nodes))
    score = settings.lever != "fgd-route"
    table = route_table(
        snapshot,
        settings.mix,
        every,
        routed,
        score=score,
        weights=weights,
        rank_by_order=settings.lever == "fgd-route-shape",
    )
    features = {name: frozenset({route_feature(name)}) for name in routed}
    return NodeLevers(weights, features, table)


def _routed(nodes: list[Node]) -> list[str]:
    """Nodes that get a route feature: those whose feature no other node shares (two
    names that differ only in characters a feature cannot hold get none)."""
    count: dict[str, int] = {}
    for n in nodes:
        f = route_feature(n.name)
        count[f] = count.get(f, 0) + 1
    return [n.name for n in nodes if count[route_feature(n.name)] == 1]


def route_table(
    snapshot: ClusterSnapshot,
    mix: Mix,
    free: Mapping[str, _Free],
    routed: list[str],
    *,
    score: bool = False,
    weights: Mapping[str, int] | None = None,
    rank_by_order: bool = False,
) -> dict[str, object]:
    """The ``route`` entry of defrag_nodes.lua for ``fgd-route``.

    job_submit.lua keeps it between submissions and, for every one-node job, picks the
    node of ``nodes`` with the simulator's ``packing`` keys (FGD rise in ``step``
    milli-GPUs, a node in use, the least free GPU left, then this list's order, which is
    cons_tres's: Weight, then node order), names it with ``--prefer=<feature>`` and takes
    the job off its copy. Only ``routed`` nodes (:func:`_routed`) that are available (in
    ``free``) are listed. ``free`` holds each GPU's free milli-GPUs, ``cpus`` the free
    CPUs (2^20 when not tracked, as the FGD measure's vector), ``mem`` the free memory in
    MB (-1: not tracked), ``partitions`` the node's (the script names only a node of the
    job's partitions). ``score`` (``fgd-route-score``): the script uses FGD's own rule
    instead, its integer score and ties by ``rank``, a fixed order from a hash of the
    node's name (FGD's artifact breaks ties by a random node order). ``weights``: the
    Weights this cycle sets (the order Slurm will use), else the snapshot's.
    ``rank_by_order`` (``fgd-route-shape``): FGD's ties go by that order instead of the
    hash, so with shape Weights the smaller nodes come first.
    """
    names = set(routed)
    position = {n.name: i for i, n in enumerate(snapshot.nodes)}
    set_now = weights or {}

    def weight(n: Node) -> int:
        return set_now.get(n.name, n.weight if n.weight is not None else 1)

    ordered = sorted(
        (n for n in snapshot.nodes if n.name in names and n.name in free),
        key=lambda n: (weight(n), position[n.name]),
    )
    sharing = snapshot.shards_per_gpu is not None
    nodes = []
    for i, n in enumerate(ordered):
        f = free[n.name]
        mem = n.memory_free_mb
        node: dict[str, object] = {
            "feature": route_feature(n.name),
            "model": n.gpu_model or "",
            "free": list(f.vector[0]),
            "cpus": f.vector[1],
            "mem": mem if mem is not None else -1,
            "idle": f.idle,
            "rank": i if rank_by_order else zlib.crc32(n.name.encode()),
            "partitions": sorted(n.partitions),
        }
        if sharing and not n.shards:  # Slurm puts no shard job here: the script skips it
            node["no_shards"] = True
        nodes.append(node)
    types = []
    for t in mix.types:
        entry: dict[str, object] = {
            "cpus": t.cpus,
            "gpus": t.gpus,
            "milli": t.milli,
            "weight": t.weight,
        }
        if t.models is not None:
            entry["models"] = sorted(t.models)
        types.append(entry)
    return {
        "score": score,
        "step": RISE_STEP,
        # a real cluster's shards per GPU; the simulator's shares are thousandths
        "shards_per_gpu": snapshot.shards_per_gpu or SHARDS_PER_GPU,
        "mix": types,
        "nodes": nodes,
    }
