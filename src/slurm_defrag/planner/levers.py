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
  one-node k-GPU request into ``--prefer=defrag_fit<k>``. Weights are left alone.
* ``fit-tiers`` — both.

What a node offers comes from the snapshot: whole free GPUs (no owner), free CPUs, and,
for shards, ``Node.gpu_milli_used`` (milli-GPUs used per GPU). Without that field a GPU is
wholly free or wholly busy and the shard class is tagged on nodes with a free GPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from slurm_defrag.domain.cluster import ClusterSnapshot, Node
from slurm_defrag.domain.units import MILLI

LEVERS = ("none", "idle-bump", "weight-tiers", "fit-features", "fit-tiers")
FIT_PREFIX = "defrag_fit"
SHARD_FEATURE = FIT_PREFIX + "shard"
FIT_SIZES = (1, 2, 4, 8)
TIER_SPAN = 1024
"""Weight = original x TIER_SPAN + tier: the admin's order first, ours within it."""
TIER_STEP = 100
"""milli-GPUs of free capacity per Weight tier (16 GPUs -> at most 160 tiers)."""
IDLE_TIER = 512
"""Tier of a node with every GPU free: after every partly used node."""


@dataclass(frozen=True)
class LeverSettings:
    lever: str = "none"
    bump: int = 1000
    """``idle-bump``: Weight added to wholly idle GPU nodes."""
    fit_sizes: tuple[int, ...] = FIT_SIZES

    def __post_init__(self) -> None:
        if self.lever not in LEVERS:
            raise ValueError(f"lever {self.lever!r}: choose from {', '.join(LEVERS)}")

    @property
    def weights(self) -> bool:
        return self.lever in ("idle-bump", "weight-tiers", "fit-tiers")

    @property
    def features(self) -> bool:
        return self.lever in ("fit-features", "fit-tiers")


@dataclass(frozen=True)
class NodeLevers:
    """What every managed node should look like after this cycle."""

    weights: Mapping[str, int]
    """GPU node -> Weight (only when the lever sets weights)."""
    features: Mapping[str, frozenset[str]]
    """GPU node -> the slurm-defrag features it should carry (:func:`is_ours`); the
    node's own features are kept beside them (only when the lever sets features)."""


def is_ours(feature: str) -> bool:
    """A feature slurm-defrag sets and removes (never one of the admin's)."""
    return feature.startswith(FIT_PREFIX)


def pack_table(settings: LeverSettings) -> dict[str, object] | None:
    """The ``pack`` entry of defrag_nodes.lua for the fit-class features (None: none).

    job_submit.lua gives a one-node job of k GPUs, k in ``fit_sizes``, the
    ``--prefer=<fit_prefix><k>``, and a job asking only for shards ``--prefer=<shard>``.
    """
    if not settings.features:
        return None
    return {
        "fit_prefix": FIT_PREFIX,
        "fit_sizes": list(settings.fit_sizes),
        "shard_feature": SHARD_FEATURE,
    }


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


def _free(node: Node, owners: tuple[str | None, ...]) -> _Free:
    whole = sum(o is None for o in owners)
    milli = whole * MILLI
    best = MILLI
    for g, used in enumerate(node.gpu_milli_used):
        if owners[g] is not None and 0 < used < MILLI:
            milli += MILLI - used
            best = min(best, MILLI - used)
    idle = whole == node.gpu_count and (node.cpus is None or node.cpus_alloc == 0)
    return _Free(whole, milli, best, node.cpus_free, idle)


def _base(node: Node, originals: Mapping[str, int]) -> int:
    return originals.get(node.name, node.weight if node.weight is not None else 1)


def _tier(f: _Free) -> int:
    return IDLE_TIER if f.idle else min(IDLE_TIER - 1, f.milli // TIER_STEP)


def _fit_sets(free: Mapping[str, _Free], sizes: tuple[int, ...]) -> dict[str, set[str]]:
    """Feature -> nodes where that class fits leaving the least free capacity.

    Partly used nodes before idle ones (keep whole nodes whole); among them the least
    capacity left after the request, in whole GPUs: ties are many, so a cycle's feature
    set has room for several arrivals. A node with no free CPU fits nothing.
    """
    out: dict[str, set[str]] = {}
    for k in sizes:
        best: tuple[bool, int] | None = None
        members: set[str] = set()
        for name, f in free.items():
            if f.whole < k or f.cpus == 0:
                continue
            key = (f.idle, (f.milli - k * MILLI) // MILLI)
            if best is None or key < best:
                best, members = key, {name}
            elif key == best:
                members.add(name)
        out[f"{FIT_PREFIX}{k}"] = members
    # Shards: a partly used GPU with the least room first; else the fullest node with a
    # free GPU (opening a GPU there rather than on an emptier node).
    shard_best: tuple[int, bool, int] | None = None
    shard: set[str] = set()
    for name, f in free.items():
        if f.cpus == 0 or (f.whole == 0 and f.best_share == MILLI):
            continue
        key = (f.best_share, f.idle, f.milli // MILLI)
        if shard_best is None or key < shard_best:
            shard_best, shard = key, {name}
        elif key == shard_best:
            shard.add(name)
    out[SHARD_FEATURE] = shard
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
    weights: dict[str, int] = {}
    if settings.lever == "idle-bump":
        for n in nodes:
            f = free.get(n.name)
            weights[n.name] = _base(n, orig) + (settings.bump if f and f.idle else 0)
    elif settings.weights:
        for n in nodes:
            f = free.get(n.name)
            tier = IDLE_TIER if f is None else _tier(f)
            weights[n.name] = _base(n, orig) * TIER_SPAN + tier
    features: dict[str, frozenset[str]] = {}
    if settings.features:
        tagged: dict[str, set[str]] = {n.name: set() for n in nodes}
        for feature, members in _fit_sets(free, settings.fit_sizes).items():
            for name in members:
                tagged[name].add(feature)
        features = {name: frozenset(fs) for name, fs in tagged.items()}
    return NodeLevers(weights, features)
