"""Diagnostic (issue #14): how far a Slurm-executable lever can get in Protocol A.

    .venv/bin/python bench/sim_lever_ceiling.py [--seeds 1]

Runs ``packing`` beside diagnostic variants that keep one of its choices and replace the
other by what cons_tres does, so the gap between the levers (slurm mode) and ``packing``
can be split into its causes:

* ``packing/lowest-gpu`` — packing's node, but the GPUs cons_tres takes on it (lowest
  index with room, :func:`slurm_defrag.sim.gpus.lowest`): the part of packing's gain that
  comes from choosing the GPU inside the node, which no Slurm lever controls.

* ``fgd/lowest-gpu`` — the same for ``fgd``: FGD's node, cons_tres's GPUs on it (for a
  shard job, FGD takes the GPU with the best score; Slurm the lowest index with room).
* ``fgd/as-routed`` — FGD as ``fgd-route-score`` runs it through Slurm: every node scored
  at the GPU cons_tres would take, ties in the route table's fixed order.

* ``packing/cpu-first-fit`` — packing for GPU jobs, cons_tres order for CPU-only jobs
  (the levers steer GPU requests only): what steering CPU-only jobs is worth.
* ``packing/gpu-first-fit`` — the reverse: packing for CPU-only jobs only.

With ``--levers fit-features,fgd-tiers --every 30`` it runs those slurm-mode levers
instead and counts, per kind of job (CPU only, shard, whole GPUs), how often the job had
a ``--prefer``, and how often no preferred node could take it although another node
could (Slurm's fallback to any node): where the features fail to steer. Jobs that fit
nowhere (Protocol A's failed arrivals) are counted apart.

With ``--levers ... --slurm-for whole`` (or ``cpu``, ``shard``, a comma list) Slurm's
selection, steered by the levers, places only those kinds of job and ``packing`` places
the rest: the gap between a lever and ``packing`` split by the kind of job it steers
badly. ``--slurm-for cpu,shard,whole`` is the plain slurm-mode run. ``--prefer-for``
(same kinds) instead lets Slurm place every job and honours the lever's ``--prefer`` only
for those kinds: whether steering one kind pays when the others are not packed.

With ``--class-order 1,30`` it runs ``packing/class-order/<N>``: packing, except that a
whole-GPU job is placed by packing's keys (FGD rise, busy node, GPUs left) computed for
its fit class's request (its GPUs, its CPUs rounded up to the ``:c`` bucket) and
refreshed only every N arrivals. No Slurm lever can express a per-class total order, so
this estimates what a per-cycle lever can get for whole-GPU jobs when N jobs arrive per
cycle: N = 1 costs only the class request, larger N adds the staleness.

With ``--levers fgd-route,fgd-route-score --agree`` it counts, per kind of job, how often
Slurm (steered by the lever) took the node the copied policy would have taken on the same
state (``packing``; ``fgd/as-routed``): where the per-job lever decides differently.

Not a product policy: registered here only, for this measurement.
"""

from __future__ import annotations

import argparse
import time
import zlib
from collections import Counter
from dataclasses import replace
from typing import ClassVar

import numpy as np
from rich.console import Console
from rich.table import Table

import repo_traces  # noqa: F401  (sets SLURM_DEFRAG_TRACES for a checkout)
from slurm_defrag import suite
from slurm_defrag.domain.units import MILLI
from slurm_defrag.sim import gpus, report
from slurm_defrag.sim.cluster_state import BoolArray, ClusterState, IntArray
from slurm_defrag.sim.configuration import PlacementConfig, RunConfig, configure, plain
from slurm_defrag.sim.frag import FloatArray
from slurm_defrag.sim.levers import CPU_BUCKETS, SLURM_POLICY
from slurm_defrag.sim.model import JobSpec, Placement
from slurm_defrag.sim.placement.base import PolicyContext
from slurm_defrag.sim.placement.fgd import Fgd, fgd_score
from slurm_defrag.sim.placement.packing import RISE_STEP, Packing
from slurm_defrag.sim.placement.registry import POLICIES
from slurm_defrag.sim.placement.slurm_select import SlurmSelect, first_in_order


class OnLowestGpus:
    """Mixin: the policy's node, with the GPUs cons_tres takes on it (lowest index with
    room), which no Slurm lever controls."""

    def choose(
        self, state: ClusterState, job: JobSpec, feasible: BoolArray, rng: np.random.Generator
    ) -> Placement | None:
        chosen: Placement | None = super().choose(state, job, feasible, rng)  # type: ignore[misc]
        if chosen is None:
            return None
        return Placement(chosen.node, gpus.lowest(state, chosen.node, job))


class PackingLowestGpu(OnLowestGpus, Packing):
    name = "packing/lowest-gpu"


class FgdLowestGpu(OnLowestGpus, Fgd):
    name = "fgd/lowest-gpu"


class PackingCpuFirstFit(Packing):
    name = "packing/cpu-first-fit"
    packs_cpu_only = False

    def choose(
        self, state: ClusterState, job: JobSpec, feasible: BoolArray, rng: np.random.Generator
    ) -> Placement | None:
        if (job.num_gpu == 0) == self.packs_cpu_only:
            return super().choose(state, job, feasible, rng)
        node = first_in_order(state, feasible)
        return None if node is None else Placement(node, gpus.lowest(state, node, job))


class PackingGpuFirstFit(PackingCpuFirstFit):
    name = "packing/gpu-first-fit"
    packs_cpu_only = True


KINDS = {"cpu": "cpu only", "shard": "shard", "whole": "whole GPUs"}
"""``--slurm-for`` names of the job kinds, and how the tables print them."""


def job_kind(job: JobSpec) -> str:
    return KINDS["cpu"] if job.num_gpu == 0 else KINDS["shard"] if job.shared else KINDS["whole"]


class CountingSelect(SlurmSelect):
    """Slurm's selection, counting where --prefer steered and where it fell back."""

    counts: ClassVar[Counter[tuple[str, str]]] = Counter()

    def choose(
        self, state: ClusterState, job: JobSpec, feasible: BoolArray, rng: np.random.Generator
    ) -> Placement | None:
        kind = job_kind(job)
        if not feasible.any():
            self.counts[(kind, "fits nowhere")] += 1
        elif not job.prefer:
            self.counts[(kind, "no prefer")] += 1
        elif first_in_order(state, feasible & state.feature_mask(job.prefer)) is None:
            self.counts[(kind, "fell back")] += 1
        else:
            self.counts[(kind, "steered")] += 1
        return super().choose(state, job, feasible, rng)


class FgdAsRouted(Fgd):
    """FGD as ``fgd-route-score`` executes it through Slurm: each node scored at the GPU
    cons_tres takes there (a shard job: the lowest index with room), ties in the route
    table's order (CRC-32 of the node name, lowest first), GPUs lowest index first."""

    name = "fgd/as-routed"

    def __init__(self, ctx: PolicyContext) -> None:
        super().__init__(ctx)
        crc = np.array([zlib.crc32(s.name.encode()) for s in ctx.state.nodes], dtype=np.int64)
        self._rank = np.argsort(np.argsort(crc, kind="stable"), kind="stable")

    def node_scores(self, state: ClusterState, job: JobSpec) -> tuple[FloatArray, IntArray]:
        if not job.shared:
            return super().node_scores(state, job)
        score = fgd_score(self.cache.delta(state, job))
        lowest = np.argmax(state.gpu_left >= job.gpu_milli, axis=1)
        return score[np.arange(state.size), lowest], lowest


class AgreeingSelect(SlurmSelect):
    """Slurm's selection, counting per kind of job whether it took the node of the policy
    the per-job lever copies (``packing`` for ``fgd-route``, :class:`FgdAsRouted` for
    ``fgd-route-score``), on the same state before the job starts."""

    counts: ClassVar[Counter[tuple[str, str]]] = Counter()
    copies: ClassVar[type[Packing | Fgd]] = Packing

    def __init__(self, ctx: PolicyContext) -> None:
        super().__init__(ctx)
        self.copy = self.copies(ctx)

    def choose(
        self, state: ClusterState, job: JobSpec, feasible: BoolArray, rng: np.random.Generator
    ) -> Placement | None:
        ours = super().choose(state, job, feasible, rng)
        if ours is not None:
            theirs = self.copy.choose(state, job, feasible, rng)
            same = theirs is not None and theirs.node == ours.node
            self.counts[(job_kind(job), "same node" if same else "other node")] += 1
        return ours


class SlurmForSomeKinds(SlurmSelect):
    """Slurm's selection (so the levers' weights and ``--prefer``) for the job kinds in
    ``kinds``; ``packing`` for the others, on the same cluster state."""

    kinds: ClassVar[frozenset[str]] = frozenset(KINDS.values())

    def __init__(self, ctx: PolicyContext) -> None:
        super().__init__(ctx)
        self.packing = Packing(ctx)

    def choose(
        self, state: ClusterState, job: JobSpec, feasible: BoolArray, rng: np.random.Generator
    ) -> Placement | None:
        if job_kind(job) in self.kinds:
            return super().choose(state, job, feasible, rng)
        return self.packing.choose(state, job, feasible, rng)


def cpu_bucket(cpu_milli: int) -> int:
    """The ``:c`` class's CPUs (milli) for a request: the smallest power of two >= its CPUs."""
    cpus = max(1, -(-cpu_milli // MILLI))
    return MILLI * next(b for b in (*CPU_BUCKETS, cpus) if b >= cpus)


class PackingClassOrder(Packing):
    """Packing with a whole-GPU job's node keys per fit class, refreshed every ``every``
    arrivals (``--class-order``)."""

    every: ClassVar[int] = 1

    def __init__(self, ctx: PolicyContext) -> None:
        super().__init__(ctx)
        self.arrivals = 0
        self.keys: dict[tuple[object, ...], tuple[int, np.ndarray]] = {}

    def choose(
        self, state: ClusterState, job: JobSpec, feasible: BoolArray, rng: np.random.Generator
    ) -> Placement | None:
        self.arrivals += 1
        if job.num_gpu == 0 or job.shared or not feasible.any():
            return super().choose(state, job, feasible, rng)
        cycle = (self.arrivals - 1) // self.every
        request = replace(job, cpu_milli=cpu_bucket(job.cpu_milli))
        cls = (request.num_gpu, request.cpu_milli, request.gpu_models)
        seen = self.keys.get(cls)
        if seen is None or seen[0] != cycle:
            rise = np.floor(self.cache.delta(state, request).min(axis=1) / RISE_STEP)
            # lexsort keys, last = primary: node order, GPUs left, idle, rise (as packing)
            order = np.lexsort((self._rank, state.gpu_left.sum(axis=1), ~state.in_use(), rise))
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            seen = (cycle, rank)
            self.keys[cls] = seen
        idx = np.flatnonzero(feasible)
        node = int(idx[np.argmin(seen[1][idx])])
        return Placement(node, gpus.block_preserving(state, node, job))


class PreferForSomeKinds(SlurmSelect):
    """Slurm's selection for every job, the ``--prefer`` kept only for ``kinds``."""

    kinds: ClassVar[frozenset[str]] = frozenset(KINDS.values())

    def choose(
        self, state: ClusterState, job: JobSpec, feasible: BoolArray, rng: np.random.Generator
    ) -> Placement | None:
        if job.prefer and job_kind(job) not in self.kinds:
            job = replace(job, prefer=None)
        return super().choose(state, job, feasible, rng)


DIAGNOSTIC = (PackingLowestGpu, FgdLowestGpu, FgdAsRouted, PackingCpuFirstFit, PackingGpuFirstFit)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--levers", default="", help="comma list: count slurm-mode levers")
    ap.add_argument("--every", type=int, default=30, help="arrivals per lever cycle")
    ap.add_argument(
        "--slurm-for", default="", help=f"with --levers: comma list of {', '.join(KINDS)}"
    )
    ap.add_argument(
        "--prefer-for", default="", help="with --levers: honour --prefer only for these kinds"
    )
    ap.add_argument(
        "--class-order", default="", help="comma list of N: packing/class-order/<N> runs"
    )
    ap.add_argument(
        "--agree", action="store_true", help="with --levers: count jobs placed on packing's node"
    )
    ap.add_argument("--whole-cpus", action="store_true", help="jobs' CPUs rounded up to whole CPUs")
    args = ap.parse_args()
    WHOLE_CPUS["on"] = args.whole_cpus
    if args.class_order:
        every = args.class_order.split(",")
        if not all(n.isdigit() and int(n) >= 1 for n in every):
            ap.error(f"--class-order: whole numbers >= 1, got {args.class_order!r}")
        class_order([int(n) for n in every], args.seeds)
        return
    for option, policy in (("slurm_for", SlurmForSomeKinds), ("prefer_for", PreferForSomeKinds)):
        given = getattr(args, option)
        if not given:
            continue
        flag = "--" + option.replace("_", "-")
        if not args.levers:
            ap.error(f"{flag} needs --levers")
        unknown = set(given.split(",")) - set(KINDS)
        if unknown:
            ap.error(
                f"{flag}: unknown kind {', '.join(sorted(unknown))}; choose from {', '.join(KINDS)}"
            )
        policy.kinds = frozenset(KINDS[k] for k in given.split(","))
        split_by_kind(args.levers.split(","), args.every, args.seeds, policy)
        return
    if args.levers and args.agree:
        agree(args.levers.split(","), args.every, args.seeds)
        return
    if args.levers:
        count_levers(args.levers.split(","), args.every, args.seeds)
        return
    for diag in DIAGNOSTIC:
        POLICIES[diag.name] = diag
    s = suite.Suite(
        overlay="none",
        nvlink_jobs=False,
        seeds=tuple(range(42, 42 + args.seeds)),
        policies=("first-fit", "packing", "fgd", *(d.name for d in DIAGNOSTIC)),
        defrag=("none",),
        whole_cpus=args.whole_cpus,
    )
    t0 = time.perf_counter()
    runs = suite.protocol_a(s)
    console = Console(width=160)
    console.print(report.table_a(runs, "Protocol A — openb default, lever ceiling", False))
    console.print(f"{len(runs)} runs in {time.perf_counter() - t0:.0f} s")


WHOLE_CPUS = {"on": False}
"""``--whole-cpus``: every run's jobs ask for whole CPUs (``suite.Suite.whole_cpus``)."""


def lever_suite(placement: PlacementConfig, seeds: int) -> suite.Suite:
    return suite.Suite(
        overlay="none",
        nvlink_jobs=False,
        seeds=tuple(range(42, 42 + seeds)),
        configs=(RunConfig(placement),),
        whole_cpus=WHOLE_CPUS["on"],
    )


def lever_placements(levers: list[str], every: int) -> list[PlacementConfig]:
    """Slurm's selection with each lever applied every ``every`` arrivals (``none``:
    Slurm alone), as a profile's ``[placement]`` would say it."""
    return [
        plain(SLURM_POLICY)
        if lever == "none"
        else configure(
            f"{lever}/{every}", placement={"lever": lever, "lever_every": every}
        ).placement
        for lever in levers
    ]


def run_and_print(console: Console, name: str | PlacementConfig, seeds: int, title: str) -> None:
    """Protocol A for one placement over ``seeds`` seeds: its table and how long it took."""
    t0 = time.perf_counter()
    runs = suite.protocol_a(lever_suite(plain(name) if isinstance(name, str) else name, seeds))
    console.print(report.table_a(runs, title, False))
    console.print(f"{len(runs)} runs in {time.perf_counter() - t0:.0f} s")


def split_by_kind(
    levers: list[str], every: int, seeds: int, policy: type[SlurmForSomeKinds | PreferForSomeKinds]
) -> None:
    POLICIES[SLURM_POLICY] = policy
    console = Console(width=160)
    which = ", ".join(sorted(policy.kinds))
    rest = "packing for the rest" if policy is SlurmForSomeKinds else "no --prefer for the rest"
    for p in lever_placements(levers, every):
        run_and_print(console, p, seeds, f"Protocol A — {p.name} for {which}, {rest}")


def class_order(every: list[int], seeds: int) -> None:
    console = Console(width=160)
    for n in every:
        PackingClassOrder.every = n
        name = f"packing/class-order/{n}"
        POLICIES[name] = PackingClassOrder
        run_and_print(console, name, seeds, f"Protocol A — {name}")


def agree(levers: list[str], every: int, seeds: int) -> None:
    POLICIES[SLURM_POLICY] = AgreeingSelect
    console = Console(width=160)
    for p in lever_placements(levers, every):
        AgreeingSelect.counts.clear()
        AgreeingSelect.copies = FgdAsRouted if "route-score" in p.name else Packing
        run_and_print(console, p, seeds, f"Protocol A — {p.name}")
        table = Table("job kind", f"{AgreeingSelect.copies.name}'s node", "another node")
        for kind in KINDS.values():
            c = AgreeingSelect.counts
            table.add_row(kind, str(c[(kind, "same node")]), str(c[(kind, "other node")]))
        console.print(table)


def count_levers(levers: list[str], every: int, seeds: int) -> None:
    POLICIES[SLURM_POLICY] = CountingSelect
    console = Console(width=160)
    for p in lever_placements(levers, every):
        CountingSelect.counts.clear()
        run_and_print(console, p, seeds, f"Protocol A — {p.name}")
        table = Table("job kind", "fits nowhere", "no prefer", "steered", "fell back")
        for kind in KINDS.values():
            c = CountingSelect.counts
            table.add_row(
                kind,
                *(
                    str(c[(kind, what)])
                    for what in ("fits nowhere", "no prefer", "steered", "fell back")
                ),
            )
        console.print(table)


if __name__ == "__main__":
    main()
