"""Candidate placements (options) for the targets, with exact pruning.

Without pruning every block of every eligible node is an option for every target: exact,
and fine for small clusters. For big ones the options are pruned so that the optimum is
kept (argument in docs/planner.md, "Pruning"):

1. *Singletons.* For each target class (same demand item: partition, model, shape) and
   each eligible node, the cheapest way to host one share alone (requeue or drain) is
   computed; only the ``M`` cheapest nodes are kept, each with that cheapest option, where
   ``M`` counts the shares of all targets that may use some node of the class's pool.
   ``theta`` is the cost of the ``M``-th.
2. *Co-hosting bargains.* Where some multiset of two or more shares costs less together
   than the sum of their classes' ``theta``, the blocks of its optimal arrangement are
   added as options.
3. *Coupled nodes* (holding a requeueable multi-node job, whose cost is shared) and nodes
   of multi-node NVLink domains wanted by a target are kept with every option.

Exchange argument: in any optimal plan, the shares on a node where their combination is not
kept can be moved to unused kept nodes at no greater cost (a kept combination is replaced by
its stored optimal arrangement); at most ``M`` nodes of a pool are ever used, so unused kept
nodes always exist. Limits are not part of the argument: the planner checks
them on the result and re-solves (see :mod:`slurm_defrag.planner.facade`).
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from itertools import accumulate, combinations_with_replacement, repeat

from slurm_defrag.domain.cluster import ClusterSnapshot, Job, Node
from slurm_defrag.domain.job_limits import NO_LIMITS, JobLimits, job_limits
from slurm_defrag.domain.topology import GpuTopology, popcount
from slurm_defrag.metrics.classes import group_nodes
from slurm_defrag.metrics.demand import DemandItem
from slurm_defrag.metrics.fit import Verdict, structural_verdict
from slurm_defrag.planner.deadline import CHECK_EVERY, Deadline
from slurm_defrag.planner.geometry import Geometry, arrange, blocks_for, share_size
from slurm_defrag.planner.nodes import SUBSET_JOB_CAP, JobTable, NodeState, node_state
from slurm_defrag.policy.cost import to_milli
from slurm_defrag.policy.drain import DrainConfig
from slurm_defrag.solver.problem import OptionKind

INF = float("inf")

CAP_RAN_OUT = "the plan's wall cap (solver.max_time_in_seconds) ran out before its candidates"
"""Why a target has no candidates when :mod:`.deadline` cut the candidate stage."""
BUDGET_SPENT = "the options budget (solver.max_options) went to targets of higher value"
"""Why a target has no candidates when the options of higher-value ones filled the budget."""


@dataclass(frozen=True, slots=True)
class TargetSpec:
    job: Job
    item: DemandItem
    geometry: Geometry
    nodes: int
    value: int
    same_domain: bool = False


@dataclass(frozen=True, slots=True)
class RawOption:
    """An option before indexing: node by snapshot index, victims by job-table index."""

    target: int
    node: int
    mask: int
    kind: OptionKind
    victims: tuple[int, ...] = ()
    busy: int = 0
    cost: int = 0
    """Victims' cost (requeue) or idle GPU-hours (drain), milli."""
    wait_s: float = 0.0
    blockers: tuple[str, ...] = ()

    def composite(self, weight: int) -> int:
        return weight * self.cost + self.busy


@dataclass
class TargetInfo:
    eligible: list[int] = field(default_factory=list)
    ineligible: list[tuple[int, Verdict]] = field(default_factory=list)
    """(node index, why it can never host a share) for nodes of the target's partition."""
    ranked: list[tuple[int, int]] | None = None
    """When pruning: (composite cost, node) of the cheapest nodes for one share."""
    unexamined: str = ""
    """Why its candidates were not built ("" when they were): the wall cap ran out, or the
    options budget was spent on targets of higher value (:mod:`.deadline`)."""


@dataclass
class Candidates:
    options: list[RawOption]
    info: list[TargetInfo]
    states: dict[int, NodeState]
    pruned: bool
    singles: dict[tuple[int, Geometry], tuple[RawOption | None, RawOption | None]]
    """(node, geometry) -> (cheapest requeue option, cheapest drain option), target -1."""
    builder: CandidateBuilder
    """For explanations: computes more single-share costs on demand."""


class CandidateBuilder:
    def __init__(
        self,
        snapshot: ClusterSnapshot,
        targets: list[TargetSpec],
        table: JobTable,
        drain: DrainConfig,
        now: datetime,
        weight: int,
        clock: Deadline | None = None,
        max_options: int | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.targets = targets
        self.table = table
        self.drain = drain
        self.now = now
        self.weight = weight
        """Objective weight of cost against busy GPUs (> any busy count)."""
        self.clock = clock if clock is not None else Deadline.unlimited()
        self.max_options = max_options
        """Most options :meth:`build` keeps (the memory bound; None: no bound)."""
        self._building = False
        """The clock is watched while the candidates are built, not when explanations
        ask the builder more questions later (they have their own stage)."""
        self.states: dict[int, NodeState] = {}
        self.singles: dict[tuple[int, Geometry], tuple[RawOption | None, RawOption | None]] = {}
        self._drains: dict[tuple[int, Geometry], RawOption | None] = {}
        self._count_bounds: dict[int, list[float]] = {}
        self._lower: dict[tuple[int, Geometry], float] = {}
        self._lb_order: dict[Geometry, list[tuple[float, int]]] = {}
        self._lb_nodes: dict[Geometry, set[int]] = {}
        self._full_count: int | None = None
        self._menus: dict[object, list[tuple[tuple[Geometry, ...], float]]] = {}
        self.node_index = {n.name: i for i, n in enumerate(snapshot.nodes)}
        self._able: dict[tuple[int, Geometry], list[int]] = {}
        self._verdicts: dict[int, Counter[str]] = {}

    # -- building blocks --------------------------------------------------------------

    def state(self, n: int) -> NodeState:
        st = self.states.get(n)
        if st is None:
            st = self.states[n] = node_state(
                self.snapshot, n, self.snapshot.nodes[n], self.table, self.now
            )
        return st

    def eligibility(self) -> list[TargetInfo]:
        """Nodes that could ever host a share of each target (metrics' structural verdict)."""
        kinds = group_nodes(self.snapshot)
        # Per kind, its nodes and their indices, once: a kind's verdict holds for all of
        # them, so most classes take a kind's nodes whole (500 targets x 10,000 nodes
        # node by node was 1.9 s).
        members = [[m for c in kind.classes for m in c.members] for kind in kinds]
        indices = [[self.node_index[m.name] for m in ms] for ms in members]
        infos = []
        seen: dict[tuple[DemandItem, bool, JobLimits], TargetInfo] = {}
        for t in self.targets:
            limits = job_limits(t.job, t.nodes)
            key = (t.item, t.same_domain, limits)
            if key in seen:  # same demand, same nodes: share the lists (read-only)
                same = seen[key]
                infos.append(TargetInfo(same.eligible, same.ineligible, None, same.unexamined))
                continue
            info = seen[key] = TargetInfo()
            if self.clock.over("candidates"):
                self.clock.note("candidates")
                info.unexamined = CAP_RAN_OUT
                infos.append(info)
                continue
            for kind, nodes, idx in zip(kinds, members, indices, strict=True):
                v = structural_verdict(kind.rep, kind.topo, t.item)
                if v is Verdict.NOT_IN_PARTITION:
                    continue
                if v is not None:
                    info.ineligible.extend(zip(idx, repeat(v)))
                elif limits is NO_LIMITS and not t.same_domain:
                    info.eligible.extend(idx)
                else:
                    self._eligible_by_node(t, limits, nodes, idx, info)
            info.eligible.sort()
            info.ineligible.sort()
            infos.append(info)
        return infos

    def _eligible_by_node(
        self, t: TargetSpec, limits: JobLimits, nodes: list[Node], idx: list[int], info: TargetInfo
    ) -> None:
        """A kind that fits ``t``'s hardware, node by node: its own limits, its domain."""
        for node, i in zip(nodes, idx, strict=True):
            if not limits.admits(node):
                info.ineligible.append((i, Verdict.JOB_LIMITS))
            elif t.same_domain and self.snapshot.domain_of(node) is None:
                continue
            else:
                info.eligible.append(i)

    def all_options(self, t: int, n: int) -> list[RawOption]:
        """Every block of node ``n`` free of immovable GPUs, plus the best drain. A block
        with a victim as large as the share is kept: shares beside it may take more than
        it holds together (the model then asks for them, ``ProblemData.swap_need``); one
        with a victim holding all the node's shares could take (:attr:`NodeState.room`)
        is not, it is never requeued here."""
        st = self.state(n)
        g = self.targets[t].geometry
        size = share_size(st.topo, g)
        never = st.below(st.room).immovable
        costs = self.table.cost_milli
        out = []
        for b in blocks_for(st.topo, g):
            if b & never:
                continue
            victims = self.host_victims(n, (g,), st.victims_of(b), size)
            if victims is None:
                continue
            out.append(
                RawOption(
                    t,
                    n,
                    b,
                    OptionKind.REQUEUE,
                    victims,
                    popcount(b & ~st.free),
                    sum(costs[j] for j in victims),
                )
            )
        drain = self.single_drain(n, g)
        if drain is not None:
            out.append(_retarget(drain, t))
        return out

    def _requeue_option(self, t: int, n: int, b: int) -> RawOption:
        st = self.state(n)
        v = st.victims_of(b)
        return RawOption(
            t,
            n,
            b,
            OptionKind.REQUEUE,
            v,
            popcount(b & ~st.free),
            sum(self.table.cost_milli[j] for j in v),
        )

    def single(self, n: int, g: Geometry) -> tuple[RawOption | None, RawOption | None]:
        """Cheapest (requeue, drain) way to host one share of shape ``g`` alone on ``n``."""
        key = (n, g)
        hit = self.singles.get(key)
        if hit is None and key not in self.singles:
            hit = self.singles[key] = (self._best_requeue(n, g), self.single_drain(n, g))
        assert hit is not None
        return hit

    def single_drain(self, n: int, g: Geometry) -> RawOption | None:
        key = (n, g)
        if key not in self._drains:
            self._drains[key] = self._best_drain(n, g)
        return self._drains[key]

    def has_way(self, n: int, g: Geometry) -> bool:
        """Can one share of ``g`` ever be hosted on ``n`` (requeueing all it may, or
        draining)? Cheap: one memoised fit test."""
        return (self.gpus_way(n, g) and self.host_way(n, g)) or self.single_drain(n, g) is not None

    def able_nodes(self, eligible: list[int], g: Geometry) -> list[int]:
        """The nodes of ``eligible`` with :meth:`has_way`, memoised per class (an unserved
        class's members all ask the same question of every eligible node)."""
        key = (id(eligible), g)
        hit = self._able.get(key)
        if hit is None:
            hit = self._able[key] = [n for n in eligible if self.has_way(n, g)]
        return hit

    def verdict_counts(self, ineligible: list[tuple[int, Verdict]]) -> Counter[str]:
        """How many nodes of a class's ineligible list have each verdict, counted once
        per list (its targets share it): the words of an unservable target."""
        hit = self._verdicts.get(id(ineligible))
        if hit is None:
            hit = self._verdicts[id(ineligible)] = Counter(v.value for _, v in ineligible)
        return hit

    def view(self, n: int, g: Geometry) -> NodeState:
        """Node ``n`` as one share of ``g`` alone sees it: jobs as large as the share
        immovable (:meth:`NodeState.below`)."""
        st = self.state(n)
        return st.below(share_size(st.topo, g))

    def gpus_way(self, n: int, g: Geometry, swaps: bool = False) -> bool:
        """Could requeueing every job of ``n`` that may be requeued for one share of ``g``
        free GPUs for it? ``swaps``: jobs as large as the share count too."""
        st = self.state(n) if swaps else self.view(n, g)
        return arrange(st.topo, st.topo.all_mask & ~st.immovable, st.free, (g,)) is not None

    def host_way(self, n: int, g: Geometry) -> bool:
        """Could requeueing every job of ``n`` that may be requeued for one share of ``g``
        free CPUs and memory for it?"""
        return self.host_short(n, (g,), tuple(self.view(n, g).job_mask)) == (0, 0)

    def _best_requeue(self, n: int, g: Geometry) -> RawOption | None:
        st = self.view(n, g)
        size = share_size(st.topo, g)
        costs = self.table.cost_milli
        best: RawOption | None = None
        if len(st.job_mask) > SUBSET_JOB_CAP:
            for b in blocks_for(st.topo, g):
                if b & st.immovable:
                    continue
                found = self.host_victims(n, (g,), st.victims_of(b), size)
                if found is None:
                    continue
                v = found
                o = RawOption(
                    -1,
                    n,
                    b,
                    OptionKind.REQUEUE,
                    v,
                    popcount(b & ~st.free),
                    sum(costs[j] for j in v),
                )
                if best is None or _key(o, self.weight) < _key(best, self.weight):
                    best = o
            return best
        # Victim sets cheapest first: the first that admits the share gives the least cost;
        # equally cheap sets may still differ in how many busy GPUs the share takes.
        floor: int | None = None
        for cost, usable, combo in st.subsets(costs):
            if floor is not None and cost > floor:
                break
            arr = arrange(st.topo, usable, st.free, (g,))
            if arr is None:
                continue
            b = arr[1][0]
            picked = self._exact_host_victims(n, (g,), st.victims_of(b), combo)
            if picked is None:
                continue
            floor = cost
            o = RawOption(
                -1, n, b, OptionKind.REQUEUE, picked, arr[0], sum(costs[j] for j in picked)
            )
            if best is None or _key(o, self.weight) < _key(best, self.weight):
                best = o
        return best

    def _best_drain(self, n: int, g: Geometry) -> RawOption | None:
        if not self.drain.enabled:
            return None
        st = self.state(n)
        limit = self.drain.max_wait_hours * 3600
        ends = st.end_s
        drainable = 0
        for i, e in enumerate(ends):
            if e is not None and e <= limit:
                drainable |= 1 << i
        if popcount(drainable) < g.k:
            return None
        best: RawOption | None = None
        for b in blocks_for(st.topo, g):
            if b & drainable != b or not b & ~st.free:
                continue
            wait = max(ends[i] or 0.0 for i in range(st.topo.gpu_count) if b >> i & 1)
            # Every GPU of a drained node idles from when it frees until the hand-over.
            idle = sum(max(0.0, wait - e) for e in ends if e is not None)
            blockers = tuple(
                sorted(
                    {bid for i, bid in enumerate(st.blocker_ids) if b >> i & 1 and bid is not None}
                )
            )
            o = RawOption(
                -1,
                n,
                b,
                OptionKind.DRAIN,
                (),
                popcount(b & ~st.free),
                to_milli(idle / 3600),
                wait,
                blockers,
            )
            if best is None or _key(o, self.weight) < _key(best, self.weight):
                best = o
        return best

    def cohost(self, n: int, shares: tuple[Geometry, ...]) -> tuple[int, tuple[int, ...]] | None:
        """Least composite cost of hosting all ``shares`` together on ``n`` by requeueing,
        with the blocks that achieve it (one per share); None if they never fit. Only jobs
        holding fewer GPUs here than the shares take together may be requeued for them."""
        st = self.state(n)
        st = st.below(sum(share_size(st.topo, g) for g in shares))
        costs = self.table.cost_milli
        best: tuple[int, tuple[int, ...]] | None = None
        floor: int | None = None
        for cost, usable, combo in st.subsets(costs):
            if floor is not None and cost > floor:
                break
            arr = arrange(st.topo, usable, st.free, shares)
            if arr is None:
                continue
            v = self._exact_host_victims(n, shares, st.victims_of(_union(arr[1])), combo)
            if v is None:
                continue
            floor = cost
            c = self.weight * sum(costs[j] for j in v) + arr[0]
            if best is None or c < best[0]:
                best = (c, arr[1])
        return best

    # -- CPUs and memory ---------------------------------------------------------------

    def host_short(
        self, n: int, shares: tuple[Geometry, ...], victims: tuple[int, ...]
    ) -> tuple[int, int]:
        """(CPUs, MB) still missing on ``n`` for ``shares`` once ``victims`` are gone;
        untracked resources are never missing."""
        if not any(g.cpus or g.memory_mb for g in shares):
            return 0, 0  # the common case without host data: no lookups
        node = self.snapshot.nodes[n]
        jobs = [self.snapshot.job_by_id[self.table.ids[j]] for j in victims]
        short = [0, 0]
        for i, (have, need, freed) in enumerate(
            (
                (node.cpus_free, sum(g.cpus for g in shares), (j.cpus_per_node for j in jobs)),
                (
                    node.memory_free_mb,
                    sum(g.memory_mb for g in shares),
                    (j.memory_mb_per_node for j in jobs),
                ),
            )
        ):
            if have is not None and need:
                short[i] = max(0, need - have - sum(freed))
        return short[0], short[1]

    def host_victims(
        self, n: int, shares: tuple[Geometry, ...], victims: tuple[int, ...], size: int
    ) -> tuple[int, ...] | None:
        """``victims``, plus the cheapest further requeueable jobs of ``n`` holding fewer
        than ``size`` GPUs there (greedily, by cost) if the shares also need their CPUs or
        memory; None if even all are not enough. Used where victim sets are not
        enumerated (see :meth:`_best_requeue`). ``size``: the GPUs the shares take here
        (the swap rule, :meth:`NodeState.below`)."""
        if self.host_short(n, shares, victims) == (0, 0):
            return victims
        costs = self.table.cost_milli
        out = list(victims)
        more = set(self.state(n).below(size).job_mask) - set(victims)
        for j in sorted(more, key=lambda j: costs[j]):
            out.append(j)
            if self.host_short(n, shares, tuple(out)) == (0, 0):
                return tuple(sorted(out))
        return None

    def _exact_host_victims(
        self, n: int, shares: tuple[Geometry, ...], victims: tuple[int, ...], combo: tuple[int, ...]
    ) -> tuple[int, ...] | None:
        """In a cheapest-first walk over victim sets ``combo``: the jobs to requeue, or None
        when this set cannot give the shares their CPUs and memory (a dearer set may)."""
        if self.host_short(n, shares, victims) == (0, 0):
            return victims
        return combo if self.host_short(n, shares, combo) == (0, 0) else None

    # -- the two modes ----------------------------------------------------------------

    def count_full(self, infos: list[TargetInfo]) -> int:
        """Upper bound of the unpruned option count (blocks, ignoring immovable GPUs)."""
        if self._full_count is None:
            total = 0
            per: dict[tuple[str, Geometry], int] = {}
            # Targets of one class share their eligible list: count its topologies once
            # (500 targets x 10,000 nodes was 10 s of lookups).
            topos: dict[int, Counter[str]] = {}
            by_name: dict[str, GpuTopology] = {}
            for t, info in zip(self.targets, infos, strict=True):
                counts = topos.get(id(info.eligible))
                if counts is None:
                    counts = topos[id(info.eligible)] = Counter()
                    for n in info.eligible:
                        topo = self.snapshot.topology_of(self.snapshot.nodes[n])
                        by_name.setdefault(topo.name, topo)
                        counts[topo.name] += 1
                for name, k in counts.items():
                    key = (name, t.geometry)
                    if key not in per:
                        per[key] = len(blocks_for(by_name[name], t.geometry)) + 1
                    total += per[key] * k
            self._full_count = total
        return self._full_count

    def build(self, prune: bool, infos: list[TargetInfo] | None = None) -> Candidates:
        self._building = True
        try:
            return self._build(prune, infos)
        finally:
            self._building = False

    def _build(self, prune: bool, infos: list[TargetInfo] | None) -> Candidates:
        infos = infos if infos is not None else self.eligibility()
        if not prune:
            per_target: list[list[RawOption]] = []
            for t, info in enumerate(infos):
                mine: list[RawOption] = []
                if not info.unexamined and self._out_of_time():
                    info.unexamined = CAP_RAN_OUT
                for n in [] if info.unexamined else info.eligible:
                    mine.extend(self.all_options(t, n))
                per_target.append(mine)
            options = self._within_budget(per_target, infos)
            return Candidates(options, infos, self.states, False, self.singles, self)
        kept_single, full_nodes, cohost = self._prune(infos)
        # Targets of one class (same eligible list, geometry and kept nodes) get the same
        # options: build them once per class, then copy them per member. Looping over
        # every eligible node of every target was 5 million iterations at 10,000 nodes
        # and 500 targets, nearly all finding nothing.
        with_cohost = sorted(cohost)
        templates: dict[tuple[int, Geometry, int], list[RawOption]] = {}
        classes: list[list[RawOption]] = []
        for t, info in enumerate(infos):
            g = self.targets[t].geometry
            key = (id(info.eligible), g, id(kept_single[t]))
            tpl = templates.get(key)
            # A ranked class's options are its kept nodes' cheapest ways, computed while
            # ranking: built even past the clock (only unranked classes have none).
            if info.unexamined:
                classes.append([])
                continue
            if tpl is None:
                tpl = templates[key] = self._class_options(
                    t, info.eligible, g, kept_single[t], full_nodes, cohost, with_cohost
                )
            classes.append(tpl)
        if self.max_options is not None and sum(map(len, classes)) > self.max_options:
            classes = self._shrunk(classes, infos, self.max_options)
        options = self._within_budget(classes, infos, copy=True)
        return Candidates(options, infos, self.states, True, self.singles, self)

    def _shrunk(
        self, classes: list[list[RawOption]], infos: list[TargetInfo], budget: int
    ) -> list[list[RawOption]]:
        """Each class's options cut to its cheapest nodes, the same multiple of its own
        shares for every class, the largest that fits ``budget`` (at least the shares
        themselves; if even that does not fit, :meth:`_within_budget` leaves out the
        targets of lowest value). Members of a class each carry its options: 2,500
        targets of a few classes sharing 2,500 kept nodes would be 6 million, the budget
        holds 1 million; cut per class, every target keeps its cheapest nodes rather
        than the lowest-value ones keeping none."""
        self.clock.note("options budget")
        members: dict[int, list[int]] = defaultdict(list)
        for t, tpl in enumerate(classes):
            if tpl:
                members[id(tpl)].append(t)
        # per class: its template, its members, and the options of its first k nodes in
        # rank order (cumulative), to try multiples without rebuilding anything
        plans: list[tuple[list[RawOption], list[int], int, list[int], list[int]]] = []
        for ts in members.values():
            tpl = classes[ts[0]]
            per_node = Counter(o.node for o in tpl)
            ranked = infos[ts[0]].ranked or []
            order = [n for _, n in ranked if n in per_node]
            order += sorted(set(per_node) - set(order))  # kept whole or co-hosting only
            sizes = list(accumulate(per_node[n] for n in order))
            shares = sum(self.targets[t].nodes for t in ts)
            plans.append((tpl, ts, shares, order, sizes))

        def total(mult: float) -> int:
            return sum(
                len(ts) * sizes[min(len(sizes), max(1, int(mult * shares))) - 1]
                for _, ts, shares, _, sizes in plans
            )

        mult = 1.0
        for m in (16.0, 8.0, 4.0, 2.0, 1.5):
            if total(m) <= budget:
                mult = m
                break
        out = list(classes)
        for tpl, ts, shares, order, _ in plans:
            keep = set(order[: min(len(order), max(1, int(mult * shares)))])
            cut = [o for o in tpl if o.node in keep]
            for t in ts:
                out[t] = cut
        return out

    def _out_of_time(self) -> bool:
        if self._building and self.clock.over("candidates"):
            self.clock.note("candidates")
            return True
        return False

    def _within_budget(
        self, per_target: list[list[RawOption]], infos: list[TargetInfo], copy: bool = False
    ) -> list[RawOption]:
        """The targets' options in target order, as many targets as ``max_options`` holds
        taken in value order (highest first; the others get none: :data:`BUDGET_SPENT`).
        ``copy``: the lists are their class's, each member gets its own copies.

        The budget is the planner's memory bound: problem data, model and explanations
        grow with the options (docs/benchmarks.md, "Memory"); a class's members each
        carry its options, so 2,500 targets sharing 2,500 kept nodes would be 6 million.
        """
        admitted = [True] * len(per_target)
        total = sum(len(x) for x in per_target)
        if self.max_options is not None and total > self.max_options:
            room = self.max_options
            for t in sorted(range(len(per_target)), key=lambda t: (-self.targets[t].value, t)):
                if len(per_target[t]) > room:
                    admitted[t] = False
                    infos[t].unexamined = infos[t].unexamined or BUDGET_SPENT
                    self.clock.note("options budget")
                else:
                    room -= len(per_target[t])
        options: list[RawOption] = []
        for t, (mine, ok) in enumerate(zip(per_target, admitted, strict=True)):
            if ok:
                options.extend((_retarget(o, t) for o in mine) if copy else mine)
        return options

    def _class_options(
        self,
        t: int,
        eligible: list[int],
        g: Geometry,
        kept: set[int],
        full_nodes: set[int],
        cohost: dict[int, dict[Geometry, set[int]]],
        with_cohost: list[int],
    ) -> list[RawOption]:
        """The pruned options of one class, in eligible-node order (as the per-target
        loop made them), for target ``t`` (retargeted per member by the caller)."""
        pool = set(eligible)
        nodes = sorted(
            (kept | (full_nodes & pool) | {n for n in with_cohost if g in cohost[n]}) & pool
        )
        out: list[RawOption] = []
        for n in nodes:
            if n in full_nodes:
                out.extend(self.all_options(t, n))
                continue
            have: set[int] = set()
            if n in kept:
                singles = [o for o in self.single(n, g) if o is not None]
                out.extend(_retarget(o, t) for o in singles)
                have = {o.mask for o in singles if o.kind is OptionKind.REQUEUE}
            extra = cohost.get(n, {}).get(g, set()) - have
            out.extend(self._requeue_option(t, n, b) for b in sorted(extra))
        return out

    def lower_bound(self, n: int, g: Geometry) -> float:
        """Cheap lower bound of the composite cost of one share of ``g`` alone on ``n``:
        free enough GPUs ignoring topology, or the exact drain (fast when nothing ends
        soon). Used to skip exact evaluation of nodes that cannot rank high enough."""
        hit = self._lower.get((n, g))
        if hit is not None:
            return hit
        hit = self._lower[(n, g)] = self._lower_bound(n, g)
        return hit

    def _lower_bound(self, n: int, g: Geometry) -> float:
        st = self.state(n)
        if len(st.job_mask) > SUBSET_JOB_CAP:
            return 0.0
        need = st.topo.gpu_count if g.kind == "whole" else g.k
        lb = self.count_bound(n, need)
        drain = self.single_drain(n, g)
        if drain is not None:
            lb = min(lb, drain.composite(self.weight))
        return lb

    def count_bound(self, n: int, need: int) -> float:
        """Composite lower bound for freeing ``need`` GPUs on ``n`` by requeueing."""
        table = self._count_bounds.get(n)
        if table is None:
            st = self.state(n)
            cap = st.topo.gpu_count
            free_n = popcount(st.free)
            # knapsack: least cost of requeueing jobs that free at least s more GPUs
            more = [0.0] + [INF] * cap
            for j, mask in st.job_mask.items():
                c, cost = popcount(mask), self.table.cost_milli[j]
                for s in range(cap, -1, -1):
                    if more[s] < INF:
                        t = min(cap, s + c)
                        more[t] = min(more[t], more[s] + cost)
            for s in range(cap - 1, -1, -1):
                more[s] = min(more[s], more[s + 1])
            table = [
                self.weight * more[max(0, s - free_n)] + max(0, s - free_n) for s in range(cap + 1)
            ]
            self._count_bounds[n] = table
        return table[need] if need < len(table) else INF

    def rank(
        self, eligible: list[int], g: Geometry, m: int, least: int = 0
    ) -> tuple[list[tuple[int, int]], float]:
        """The ``m`` cheapest nodes for one share of ``g`` (composite, node), and theta
        (the ``m``-th cost; infinite when fewer than ``m`` nodes can host it at all).
        Exact costs are computed in lower-bound order and only while they can still rank.
        Past the clock, only until ``least`` nodes are found (the class's own shares).
        """
        pool = set(eligible)
        order = self._lb_order.get(g)
        if order is None or not pool <= self._lb_nodes[g]:
            nodes = pool | self._lb_nodes.get(g, set())
            bounds = self._lower_bounds(nodes, g)
            order = self._lb_order[g] = sorted(bounds)
            self._lb_nodes[g] = {n for _, n in bounds}
        worst: list[int] = []  # max-heap (negated) of the m best exact costs
        found: list[tuple[int, int]] = []
        for i, (lb, n) in enumerate(order):
            if n not in pool:
                continue
            if lb == INF:
                break
            if len(worst) >= m and -worst[0] <= lb:
                break  # no node from here on can beat the m-th
            if len(found) >= least and i % CHECK_EVERY == 0 and self._out_of_time():
                break  # the nodes ranked so far: fewer than m, still valid options
            best = _cheapest(self.single(n, g), self.weight)
            if best is None:
                continue
            found.append((best, n))
            heapq.heappush(worst, -best)
            if len(worst) > m:
                heapq.heappop(worst)
        found.sort()
        kept = found[:m]
        theta = INF if not kept or len(kept) < m else float(kept[-1][0])
        return kept, theta

    def _lower_bounds(self, nodes: set[int], g: Geometry) -> list[tuple[float, int]]:
        """(lower bound, node) for ``nodes``; the first ones only if the clock runs out
        (their node states are most of the candidate stage's work on big clusters)."""
        out = []
        # In the set's own order, as before the clock was checked: node states number
        # the jobs as they are met, and those numbers break ties between victim sets.
        for i, n in enumerate(nodes):
            if i % CHECK_EVERY == 0 and self._out_of_time():
                break
            out.append((self.lower_bound(n, g), n))
        return out

    def _prune(
        self, infos: list[TargetInfo]
    ) -> tuple[list[set[int]], set[int], dict[int, dict[Geometry, set[int]]]]:
        """(singleton nodes per target, nodes kept whole, co-hosting blocks per node)."""
        full_nodes: set[int] = set()
        classes = self._classes(infos)
        # Targets of one demand share their eligible list (eligibility()): one pool set,
        # one "kept whole" scan and one overlap test per distinct list, not per target or
        # class (500 targets x 10,000 nodes was 5 million set insertions and lookups).
        pool_of: dict[int, set[int]] = {}
        for info in infos:
            if id(info.eligible) not in pool_of:
                pool_of[id(info.eligible)] = set(info.eligible)
        pools = [pool_of[id(info.eligible)] for info in infos]
        whole_of: dict[int, set[int]] = {}
        meets: dict[tuple[int, int], bool] = {}
        kept: list[set[int]] = [set() for _ in self.targets]
        pool_entries: dict[int, list[tuple[Geometry, float, int]]] = defaultdict(list)
        for (_, same_domain, _, _), members in classes.items():
            info = infos[members[0]]
            g = self.targets[members[0]].geometry
            if info.unexamined or self._out_of_time():
                for t in members:  # not ranked: no candidates (build leaves them out)
                    infos[t].unexamined = infos[t].unexamined or CAP_RAN_OUT
                continue
            if same_domain:  # shares cannot leave their domain: no exchange, keep all
                full_nodes.update(info.eligible)
                continue
            pid = id(info.eligible)
            whole = whole_of.get(pid)
            if whole is None:  # shared victims, or too many victim sets to rank
                whole = whole_of[pid] = self._kept_whole(info.eligible)
            full_nodes |= whole
            m_shares = self._shares_meeting(pid, pools[members[0]], pools, meets)
            own = sum(self.targets[t].nodes for t in members)
            ranked, theta = self.rank(info.eligible, g, m_shares, own)
            keep = {n for _, n in ranked}
            for t in members:
                kept[t] = keep
                infos[t].ranked = ranked
            pool_entries[pid].append((g, theta, len(members)))
        return kept, full_nodes, self._cohosting(pool_entries, pool_of, full_nodes)

    def _classes(
        self, infos: list[TargetInfo]
    ) -> dict[tuple[DemandItem, bool, Geometry, int], list[int]]:
        """Targets by class: one demand, geometry and eligible list (a job's own
        -w/-x/--constraint gives it a list of its own; the exchange argument holds within
        one list)."""
        classes: dict[tuple[DemandItem, bool, Geometry, int], list[int]] = defaultdict(list)
        for t, spec in enumerate(self.targets):
            classes[(spec.item, spec.same_domain, spec.geometry, id(infos[t].eligible))].append(t)
        return classes

    def _shares_meeting(
        self, pid: int, pool: set[int], pools: list[set[int]], meets: dict[tuple[int, int], bool]
    ) -> int:
        """At most this many nodes of the pool are ever used: shares of targets that can
        use some node of it (``meets`` memoizes the overlap test per pair of pools)."""
        m_shares = 0
        for s, p in zip(self.targets, pools, strict=True):
            key = (pid, id(p))
            hit = meets.get(key)
            if hit is None:
                hit = meets[key] = not pool.isdisjoint(p)
            if hit:
                m_shares += s.nodes
        return m_shares

    def _cohosting(
        self,
        pool_entries: dict[int, list[tuple[Geometry, float, int]]],
        pool_of: dict[int, set[int]],
        full_nodes: set[int],
    ) -> dict[int, dict[Geometry, set[int]]]:
        """Co-hosting blocks per node not kept whole."""
        # Per node, the entries of every pool holding it (order does not matter to
        # _bargains: it takes maxima and sums).
        at_node: dict[int, list[tuple[Geometry, float, int]]] = defaultdict(list)
        for pid, entries in pool_entries.items():
            for n in pool_of[pid]:
                at_node[n].extend(entries)
        cohost: dict[int, dict[Geometry, set[int]]] = {}
        for i, (n, entries) in enumerate(at_node.items()):
            if i % CHECK_EVERY == 0 and self._out_of_time():
                break  # fewer bargains: fewer options, each still valid
            if n not in full_nodes:
                blocks = self._bargains(n, entries)
                if blocks:
                    cohost[n] = blocks
        return cohost

    def _kept_whole(self, eligible: list[int]) -> set[int]:
        """Nodes whose every option is kept: shared victims, or too many victim sets."""
        out = set()
        for i, n in enumerate(eligible):
            if i % CHECK_EVERY == 0 and self._out_of_time():
                break  # the others are ranked like any node: fewer options, still valid
            st = self.state(n)
            if st.coupled or len(st.job_mask) > SUBSET_JOB_CAP:
                out.add(n)
        return out

    def _bargains(
        self, n: int, entries: list[tuple[Geometry, float, int]]
    ) -> dict[Geometry, set[int]]:
        """Blocks of every co-hosting bargain on ``n``: multisets of two or more shares
        that cost less together than the sum of their classes' theta. Per geometry, the
        blocks of the bargains' optimal arrangements (the only ones an optimum needs)."""
        st = self.state(n)
        cap = st.topo.gpu_count
        theta_max: dict[Geometry, float] = {}
        count: dict[Geometry, int] = defaultdict(int)
        for g, th, k in entries:
            if g.kind == "whole":
                continue  # takes the node: never shares it
            theta_max[g] = max(theta_max.get(g, -1.0), th)
            count[g] += k
        out: dict[Geometry, set[int]] = {}
        key = (cap, tuple(sorted((g, theta_max[g], min(count[g], cap // g.k)) for g in theta_max)))
        menu = self._menus.get(key)
        if menu is None:
            menu = self._menus[key] = _cohost_menu(cap, theta_max, count)
        for q, threshold in menu:
            if self.count_bound(n, sum(g.k for g in q)) >= threshold:
                continue  # even freeing the GPUs in any shape costs too much
            found = self.cohost(n, q)
            if found is not None and found[0] < threshold:
                for g, b in zip(q, found[1], strict=True):
                    out.setdefault(g, set()).add(b)
        return out


def _cohost_menu(
    cap: int, theta_max: dict[Geometry, float], count: dict[Geometry, int]
) -> list[tuple[tuple[Geometry, ...], float]]:
    """Multisets of two or more shares that fit ``cap`` GPUs, with their bargain threshold
    (sum of the classes' theta). Shared by all nodes of one kind."""
    geos = sorted(theta_max)
    out: list[tuple[tuple[Geometry, ...], float]] = []
    if not geos or sum(min(count[g], cap // g.k) for g in geos) < 2:
        return out  # room for at most one share: nothing to co-host
    min_k = min(g.k for g in geos)
    for size in range(2, cap // min_k + 1):
        for q in combinations_with_replacement(geos, size):
            if sum(g.k for g in q) > cap or any(q.count(g) > count[g] for g in set(q)):
                continue
            out.append((q, sum(theta_max[g] for g in q)))
    return out


def _retarget(o: RawOption, t: int) -> RawOption:
    return RawOption(t, o.node, o.mask, o.kind, o.victims, o.busy, o.cost, o.wait_s, o.blockers)


def _key(o: RawOption, weight: int) -> tuple[int, int, int]:
    return (o.composite(weight), len(o.victims), o.mask)


def _cheapest(pair: tuple[RawOption | None, RawOption | None], weight: int) -> int | None:
    vals = [o.composite(weight) for o in pair if o is not None]
    return min(vals) if vals else None


def _union(masks: tuple[int, ...]) -> int:
    out = 0
    for m in masks:
        out |= m
    return out
