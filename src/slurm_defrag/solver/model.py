"""The CP-SAT model: variables, constraints and objective over :class:`ProblemData`.

Decision: which options (blocks) each target takes, which jobs are requeued. Every
variable is named (``take[110@node01:4,5,6]``, ``requeue[104]``) so that a dumped model
reads like the plan. The objective is lexicographic: first serve the most target value,
then lose the least victim cost (plus drain idle time), then use the fewest busy GPUs
(prefer GPUs that are free already). It is solved in two phases -- value, then cost with
the value fixed -- because one weighted sum needs coefficients around 1e15 that make the
LP relaxation too imprecise to prove optimality on big instances. The reported objective
is still the single weighted number (:class:`Weights`), so parts can be added up.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

from ortools.sat.python import cp_model

from slurm_defrag.domain.topology import indices_of
from slurm_defrag.solver.greedy import GreedyPlan, greedy
from slurm_defrag.solver.groups import Groups, deal, find_groups
from slurm_defrag.solver.parameters import SolverSettings
from slurm_defrag.solver.problem import OptionKind, ProblemData
from slurm_defrag.solver.result import SolveResult, SolveStatus


@dataclass(frozen=True, slots=True)
class Weights:
    """Objective weights making the three terms lexicographic (exact integer arithmetic)."""

    value: int
    cost: int

    @classmethod
    def for_problem(cls, data: ProblemData) -> Weights:
        # Twice the busy term plus one: a phase-2 gap below ``max_busy`` then proves the
        # cost itself (only the busy-GPU preference may be left unproven).
        cost = 2 * data.max_busy + 1
        worst = sum(j.cost for j in data.jobs) + sum(
            o.drain_cost for o in data.options if o.kind is OptionKind.DRAIN
        )
        return cls(value=cost * worst + data.max_busy + 1, cost=cost)


class _Variables:
    def __init__(self, model: cp_model.CpModel, data: ProblemData, groups: Groups) -> None:
        self.serve = [model.new_bool_var(f"serve[{t.job_id}]") for t in data.targets]
        # One variable per placement of a group (solver/groups.py); the other members'
        # options alias it, so constraints iterate over live options only.
        made: dict[int, cp_model.IntVar] = {}
        for o in groups.live:
            opt = data.options[o]
            t, n = data.targets[opt.target], data.nodes[opt.node]
            gpus = ",".join(map(str, indices_of(opt.mask)))
            made[o] = model.new_bool_var(f"take[{t.job_id}@{n.name}:{gpus}:{opt.kind}]")
        self.take = [made[groups.alias[o]] for o in range(len(data.options))]
        self.requeue = [model.new_bool_var(f"requeue[{j.job_id}]") for j in data.jobs]
        self.domain: dict[tuple[int, int], cp_model.IntVar] = {}
        for ti, t in enumerate(data.targets):
            if t.same_domain:
                for d in sorted(
                    {data.nodes[data.options[o].node].domain or 0 for o in data.target_options[ti]}
                ):
                    self.domain[(ti, d)] = model.new_bool_var(
                        f"domain[{t.job_id}:{data.domains[d]}]"
                    )


class _Constraints:
    def __init__(
        self,
        model: cp_model.CpModel,
        data: ProblemData,
        v: _Variables,
        groups: Groups,
        with_limits: bool,
    ) -> None:
        self._m, self._d, self._v, self._g = model, data, v, groups
        self._with_limits = with_limits
        self.guards: list[tuple[cp_model.IntVar, list[int]]] = []
        """The swap rule's indicators, each with the options implying it (for hints)."""
        is_live = set(groups.live)
        self._node_opts = [[o for o in opts if o in is_live] for opts in data.node_options]
        self._job_opts = [[o for o in opts if o in is_live] for opts in data.job_options]

    def add_all(self) -> None:
        self._shares_per_target()
        self._one_share_per_node()
        self._gpu_use()
        self._host_capacity()
        self._no_gratuitous_requeue()
        self._swap_rule()
        self._drained_node_exclusive()
        self._same_domain()
        if self._with_limits:
            self._limits()

    def _shares_per_target(self) -> None:
        """A served target takes exactly one block on each of its ``nodes`` nodes; per
        group, the taken blocks are the members' shares. Members are interchangeable, so
        the higher-value ones are served first (breaks the symmetry, loses nothing)."""
        for ts in self._g.members:
            lead = self._d.targets[ts[0]]
            takes = [self._v.take[o] for o in self._d.target_options[ts[0]]]
            self._m.add(sum(takes) == lead.nodes * sum(self._v.serve[t] for t in ts))
            for a, b in itertools.pairwise(ts):
                self._m.add_implication(self._v.serve[b], self._v.serve[a])

    def _one_share_per_node(self) -> None:
        """A multi-node target's shares are on distinct nodes: per group, a node holds at
        most as many of its shares as members are served (then dealing works)."""
        for ts in self._g.members:
            lead = self._d.targets[ts[0]]
            if lead.nodes == 1:
                continue
            by_node: dict[int, list[int]] = {}
            for o in self._d.target_options[ts[0]]:
                by_node.setdefault(self._d.options[o].node, []).append(o)
            for opts in by_node.values():
                if len(opts) <= 1:
                    continue
                if len(ts) == 1:
                    self._m.add_at_most_one(self._v.take[o] for o in opts)
                else:
                    self._m.add(
                        sum(self._v.take[o] for o in opts) <= sum(self._v.serve[t] for t in ts)
                    )

    def _gpu_use(self) -> None:
        """No GPU is given to two shares, and a busy GPU only if its job is requeued.

        Written per GPU as ``sum(take[o] for o using g) <= requeue[holder of g]`` (<= 1
        for a free GPU) rather than as an at-most-one plus one implication per victim: the
        same integer solutions, but the LP relaxation can no longer let two targets each
        take "half" a block and pay its victim once, which made big instances unprovable.
        A job is requeued whole: its other GPUs, on any node, are freed with it.
        """
        holder: dict[tuple[int, int], int] = {}
        for j, job in enumerate(self._d.jobs):
            for n, mask in job.gpus:
                for g in indices_of(mask):
                    holder[(n, g)] = j
        for n, opts in enumerate(self._node_opts):
            for g in range(self._d.nodes[n].gpu_count):
                using = [self._v.take[o] for o in opts if self._d.options[o].mask >> g & 1]
                if not using:
                    continue
                owner = holder.get((n, g))
                drains = any(
                    self._d.options[o].kind is OptionKind.DRAIN
                    for o in opts
                    if self._d.options[o].mask >> g & 1
                )
                if owner is None or drains:
                    # free GPU, or a drain may wait for its (possibly protected) holder
                    if len(using) > 1:
                        self._m.add_at_most_one(using)
                    if owner is not None:
                        for o in opts:
                            opt = self._d.options[o]
                            if opt.mask >> g & 1 and opt.kind is OptionKind.REQUEUE:
                                self._m.add_implication(self._v.take[o], self._v.requeue[owner])
                else:
                    self._m.add(sum(using) <= self._v.requeue[owner])

    def _host_capacity(self) -> None:
        """Shares taken on a node fit its free CPUs and memory plus what victims free.

        Slurm starts a job only where its CPUs and memory fit too, so a block of free GPUs
        on a node whose CPUs are all taken is no use. Drains wait for their blockers and
        host no other share, so only requeue options count here.
        """
        on_node: dict[int, list[int]] = {}
        for j, job in enumerate(self._d.jobs):
            for n, _ in job.gpus:
                on_node.setdefault(n, []).append(j)
        for n, node in enumerate(self._d.nodes):
            opts = [o for o in self._node_opts[n] if self._d.options[o].kind is OptionKind.REQUEUE]
            targets = [self._d.targets[self._d.options[o].target] for o in opts]
            holders = [self._d.jobs[j] for j in on_node.get(n, [])]
            self._fits(
                node.cpus_free,
                opts,
                [t.cpus for t in targets],
                on_node.get(n, []),
                [j.cpus for j in holders],
            )
            self._fits(
                node.memory_free,
                opts,
                [t.memory for t in targets],
                on_node.get(n, []),
                [j.memory for j in holders],
            )

    def _fits(
        self, free: int | None, opts: list[int], asks: list[int], jobs: list[int], held: list[int]
    ) -> None:
        if free is None or sum(asks) <= free:
            return  # never binds
        self._m.add(
            sum(a * self._v.take[o] for o, a in zip(opts, asks, strict=True))
            <= free + sum(h * self._v.requeue[j] for j, h in zip(jobs, held, strict=True))
        )

    def _no_gratuitous_requeue(self) -> None:
        """A job is requeued only for a block that is taken: victims are minimal even when
        a job's cost is zero."""
        for j, opts in enumerate(self._job_opts):
            if not opts:
                self._m.add(self._v.requeue[j] == 0)
                continue
            self._m.add_bool_or([self._v.take[o] for o in opts]).only_enforce_if(self._v.requeue[j])

    def _swap_rule(self) -> None:
        """A job is requeued for shares on a node only if they take more GPUs there than
        it holds: an option whose victim is as large as its own share is taken only with
        other requeue shares on the node, ``sum(GPUs x take) >= swap_need``
        (``ProblemData.swap_need``). One constraint per node and need: options of one
        need share an indicator (each implies it) rather than one sum each."""
        d, take = self._d, self._v.take
        for n, opts in enumerate(self._node_opts):
            needy: dict[int, list[int]] = {}
            for o in opts:
                if d.swap_need[o]:
                    needy.setdefault(d.swap_need[o], []).append(o)
            if not needy:
                continue
            total = sum(
                d.options[o].mask.bit_count() * take[o]
                for o in opts
                if d.options[o].kind is OptionKind.REQUEUE
            )
            for need, these in sorted(needy.items()):
                if len(these) == 1:
                    guard = take[these[0]]
                else:
                    guard = self._m.new_bool_var(f"beside[{d.nodes[n].name}:{need}]")
                    for o in these:
                        self._m.add_implication(take[o], guard)
                    self.guards.append((guard, these))
                self._m.add(total >= need * guard)

    def _drained_node_exclusive(self) -> None:
        """A node drained for one share hosts no other share of the plan.

        Linear in the node's options: ``drained`` is the (at most one) drain taken, and
        each other option excludes it. Pairwise implications were quadratic: 12 s of model
        building on the 10,000-node benchmark.
        """
        for n, opts in enumerate(self._node_opts):
            drains = [o for o in opts if self._d.options[o].kind is OptionKind.DRAIN]
            if not drains:
                continue
            others = [o for o in opts if self._d.options[o].kind is not OptionKind.DRAIN]
            if len(drains) == 1 and len(others) <= 1:
                if others:
                    self._m.add_at_most_one(self._v.take[drains[0]], self._v.take[others[0]])
                continue
            drained = self._m.new_bool_var(f"drained[{self._d.nodes[n].name}]")
            self._m.add(sum(self._v.take[o] for o in drains) == drained)
            for o in others:
                self._m.add_at_most_one(self._v.take[o], drained)

    def _same_domain(self) -> None:
        """A multi-node NVLink target lives inside one NVLink domain."""
        for t, target in enumerate(self._d.targets):
            if not target.same_domain:
                continue
            doms = {d: var for (ti, d), var in self._v.domain.items() if ti == t}
            self._m.add(sum(doms.values()) == self._v.serve[t])
            for o in self._d.target_options[t]:
                d = self._d.nodes[self._d.options[o].node].domain
                assert d is not None
                self._m.add_implication(self._v.take[o], doms[d])

    def _limits(self) -> None:
        """Victims per plan (already net of the hourly budget), GPU-hours lost, per victim
        user (requeues and GPU-hours), per target user (:meth:`_served_caps`)."""
        lim, req = self._d.limits, self._v.requeue
        if lim.max_victims is not None:
            self._m.add(sum(req) <= lim.max_victims)
        if lim.max_lost is not None:
            self._m.add(sum(j.lost * req[i] for i, j in enumerate(self._d.jobs)) <= lim.max_lost)
        if lim.user_caps or lim.user_lost_caps:
            by_user: dict[int, list[int]] = {}
            for i, j in enumerate(self._d.jobs):
                by_user.setdefault(j.user, []).append(i)
            for u, mine in sorted(by_user.items()):
                cap = lim.user_caps[u] if lim.user_caps else None
                if cap is not None and len(mine) > cap:
                    self._m.add(sum(req[i] for i in mine) <= cap)
                lost = lim.user_lost_caps[u] if lim.user_lost_caps else None
                if lost is not None and sum(self._d.jobs[i].lost for i in mine) > lost:
                    self._m.add(sum(self._d.jobs[i].lost * req[i] for i in mine) <= lost)
        self._served_caps()

    def _served_caps(self) -> None:
        """What requeues for one user's targets may spend (the beneficiary side).

        ``served[u,j]`` is implied by every taken option of a target of user ``u`` that
        has ``j`` as a victim (``j`` not ``u``'s own job); the sum of ``served`` and of
        the jobs' lost GPU-hours over ``j`` stay within ``u``'s caps. A job freeing blocks
        for two users counts for both (the executor counts it so too). Targets of a capped
        user are grouped only among themselves (:mod:`.groups`), so a group's ``take``
        belongs to one user. Only caps that can bind are posted.
        """
        d = self._d
        for c, cap in enumerate(d.limits.served_caps):
            causes: dict[int, list[int]] = {}
            for t, tc in enumerate(d.target_cap):
                if tc != c:
                    continue
                for o in d.target_options[t]:
                    for j in d.options[o].victims:
                        if d.users[d.jobs[j].user] != cap.user:
                            causes.setdefault(j, []).append(o)
            count = (
                cap.requeues if cap.requeues is not None and len(causes) > cap.requeues else None
            )
            total = sum(d.jobs[j].lost for j in causes)
            lost = cap.lost if cap.lost is not None and total > cap.lost else None
            if count is None and lost is None:
                continue
            served: dict[int, cp_model.IntVar] = {}
            for j, opts in sorted(causes.items()):
                x = self._m.new_bool_var(f"served[{cap.user}:{d.jobs[j].job_id}]")
                for o in dict.fromkeys(self._g.alias[o] for o in opts):
                    self._m.add_implication(self._v.take[o], x)
                served[j] = x
            if count is not None:
                self._m.add(sum(served.values()) <= count)
            if lost is not None:
                self._m.add(sum(d.jobs[j].lost * x for j, x in served.items()) <= lost)


class _Objective:
    def __init__(
        self,
        model: cp_model.CpModel,
        data: ProblemData,
        v: _Variables,
        w: Weights,
        live: tuple[int, ...],
    ) -> None:
        self._m, self._d, self._v, self._w = model, data, v, w
        d = data
        self.unserved = sum(t.value * (1 - v.serve[i]) for i, t in enumerate(d.targets))
        cost = sum(j.cost * v.requeue[i] for i, j in enumerate(d.jobs) if j.cost)
        opts = [(i, d.options[i]) for i in live]
        drain = sum(o.drain_cost * v.take[i] for i, o in opts if o.drain_cost)
        busy = sum(o.busy * v.take[i] for i, o in opts if o.busy)
        self.cost = w.cost * (cost + drain) + busy

    def value_phase(self) -> None:
        """Phase 1: serve the most target value."""
        self._m.minimize(self.unserved)

    def cost_phase(self, unserved: int) -> None:
        """Phase 2: with at most ``unserved`` value left unserved, the least cost."""
        self._m.add(self.unserved <= unserved)
        self._m.minimize(self.cost)


class _GapStop(cp_model.CpSolverSolutionCallback):
    """Stop once the objective is within ``gap`` of the bound. CP-SAT's own
    ``absolute_gap_limit`` is not checked by the interleaved (deterministic) search."""

    def __init__(self, gap: int) -> None:
        super().__init__()
        self._gap = gap

    def on_solution_callback(self) -> None:
        if self.objective_value - self.best_objective_bound <= self._gap:
            self.stop_search()


@dataclass(frozen=True, slots=True)
class _Chosen:
    """A plan as option, target and job indices."""

    served: tuple[int, ...]
    taken: list[int]
    requeued: tuple[int, ...]

    @classmethod
    def of_greedy(cls, plan: GreedyPlan) -> _Chosen:
        return cls(
            served=tuple(sorted(plan.served)),
            taken=sorted(plan.taken),
            requeued=tuple(sorted(plan.requeued)),
        )


@dataclass(frozen=True, slots=True)
class _ValuePhase:
    """What phase 1 left: the unserved value fixed for phase 2, and its proven bound."""

    status: SolveStatus
    work: float
    capped: bool
    total: int  # all targets' value
    unserved: int  # the better of CP-SAT's and the greedy's
    unserved_lb: int
    # The phase-1 solver when its plan beats the greedy one (it then hints phase 2).
    better: cp_model.CpSolver | None = None


@dataclass(frozen=True, slots=True)
class _CostPhase:
    """What phase 2 left: the plan, its weighted cost and the cost's proven bound."""

    status: SolveStatus
    work: float
    capped: bool
    big: bool  # stopped once the cost was proven (the busy-GPU term may be unproven)
    runtime: float  # both phases, wall seconds
    chosen: _Chosen
    cost: int
    cost_lb: int


class PlannerModel:
    """Build once, solve once. ``with_limits=False`` gives the relaxation the planner uses
    to decompose and to bound."""

    def __init__(self, data: ProblemData, weights: Weights, with_limits: bool = True) -> None:
        self.data = data
        self.weights = weights
        self.with_limits = with_limits
        self.model = cp_model.CpModel()
        self.groups = find_groups(data)
        self.vars = _Variables(self.model, data, self.groups)
        constraints = _Constraints(self.model, data, self.vars, self.groups, with_limits)
        constraints.add_all()
        self._guards = constraints.guards
        self.objective = _Objective(self.model, data, self.vars, weights, self.groups.live)

    def solve(
        self,
        settings: SolverSettings,
        time_limit: float | None = None,
        work_limit: float | None = None,
        prefer: frozenset[int] = frozenset(),
    ) -> SolveResult:
        """Both phases within ``work_limit`` units of CP-SAT deterministic time (default:
        the settings' ``max_deterministic_time``) and ``time_limit`` wall seconds (default:
        ``max_time_in_seconds``), whichever comes first.

        The greedy plan (:mod:`.greedy`) is the hint of both phases and the answer when
        CP-SAT finds nothing in time. Phase 2 stops once the *cost* is proven (the gap
        left is below one cost unit: only the busy-GPU preference may be unproven).
        ``prefer``: options of an earlier plan the greedy starts from (a warm start).
        """
        limit = time_limit if time_limit is not None else settings.max_time_in_seconds
        work = work_limit if work_limit is not None else settings.max_deterministic_time
        t0 = time.perf_counter()
        first = greedy(self.data, self.groups, self.with_limits, prefer)
        p1 = self._value_phase(settings, first, limit / 2, work / 2)
        if p1.status is SolveStatus.INFEASIBLE or p1.status is SolveStatus.MODEL_INVALID:
            return SolveResult(status=p1.status, runtime_s=time.perf_counter() - t0)
        p2 = self._cost_phase(settings, first, p1, t0, limit, work)
        return self._result(p1, p2)

    def _value_phase(
        self, settings: SolverSettings, first: GreedyPlan, limit: float, work: float
    ) -> _ValuePhase:
        """Phase 1: the least unserved target value, hinted with the greedy plan; CP-SAT is
        skipped when counting nodes proves the greedy plan best."""
        d = self.data
        total = sum(t.value for t in d.targets)
        g_unserved = total - sum(d.targets[t].value for t in first.served)
        self._hint_greedy(first)
        self.objective.value_phase()
        hopeless = sum(
            t.value
            for i, t in enumerate(d.targets)
            if len({d.options[o].node for o in d.target_options[i]}) < t.nodes
        )
        if g_unserved == hopeless:
            # The greedy plan serves every target that has options on enough nodes: the
            # value phase is proven without CP-SAT (2.8 s of presolve on the big bench).
            return _ValuePhase(SolveStatus.OPTIMAL, 0.0, False, total, g_unserved, g_unserved)
        s1, st1, used1, capped1 = self._run(settings, limit, work)
        if st1 not in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE):
            # Nothing in time: the greedy plan, bounded by what CP-SAT proved.
            return _ValuePhase(st1, used1, capped1, total, g_unserved, 0)
        unserved, unserved_lb = round(s1.objective_value), round(s1.best_objective_bound)
        if unserved >= g_unserved:  # CP-SAT found nothing better than the greedy plan
            return _ValuePhase(st1, used1, capped1, total, g_unserved, unserved_lb)
        return _ValuePhase(st1, used1, capped1, total, unserved, unserved_lb, better=s1)

    def _cost_phase(
        self,
        settings: SolverSettings,
        first: GreedyPlan,
        p1: _ValuePhase,
        t0: float,
        limit: float,
        work: float,
    ) -> _CostPhase:
        """Phase 2: the least cost with phase 1's unserved value fixed, hinted with the
        better plan of phase 1; the plan is read from whichever solver holds it."""
        if p1.better is not None:
            self._hint(p1.better)
        self.objective.cost_phase(p1.unserved)
        left = max(0.05, limit - (time.perf_counter() - t0))
        # Big models stop once the cost is proven; the busy-GPU preference is then the
        # greedy's and CP-SAT's best effort (proving it took 24 s more on the 10,000-node
        # bench for 3 busy GPUs). Small ones prove it too.
        big = len(self.groups.live) > settings.full_model_max_options
        s2, st2, used2, capped2 = self._run(
            settings, left, max(0.05, work - p1.work), gap=self.data.max_busy if big else 0
        )
        runtime = time.perf_counter() - t0
        if st2 in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE):
            cost, cost_lb = round(s2.objective_value), round(s2.best_objective_bound)
            return _CostPhase(st2, used2, capped2, big, runtime, self._read(s2), cost, cost_lb)
        # Time ran out before phase 2 found a plan: the hinted one is still a plan.
        chosen = _Chosen.of_greedy(first) if p1.better is None else self._read(p1.better)
        cost = self._cost_of(set(chosen.taken), set(chosen.requeued))
        return _CostPhase(st2, used2, capped2, big, runtime, chosen, cost, 0)

    def _read(self, solver: cp_model.CpSolver) -> _Chosen:
        """The plan in ``solver``'s solution (read once, here)."""
        v = self.vars
        return _Chosen(
            served=tuple(i for i, x in enumerate(v.serve) if solver.boolean_value(x)),
            taken=[o for o in self.groups.live if solver.boolean_value(v.take[o])],
            requeued=tuple(i for i, x in enumerate(v.requeue) if solver.boolean_value(x)),
        )

    def _result(self, p1: _ValuePhase, p2: _CostPhase) -> SolveResult:
        """Both phases as one result: the weighted objective, its bound and what is proven."""
        d, w = self.data, self.weights
        unserved, cost, cost_lb = p1.unserved, p2.cost, p2.cost_lb
        value_proven = p1.status is SolveStatus.OPTIMAL or unserved == p1.unserved_lb
        cost_proven = p2.status is SolveStatus.OPTIMAL or (p2.big and cost - cost_lb <= d.max_busy)
        # The cost bound holds for plans leaving at most ``unserved`` unserved; the
        # composite bound only when that is proven least.
        bound = w.value * unserved + cost_lb if value_proven else w.value * p1.unserved_lb
        chosen = p2.chosen
        return SolveResult(
            status=SolveStatus.OPTIMAL if value_proven and cost_proven else SolveStatus.FEASIBLE,
            objective=w.value * unserved + cost,
            bound=bound,
            runtime_s=p2.runtime,
            taken=tuple(deal(d, self.groups, set(chosen.served), chosen.taken)),
            requeued=chosen.requeued,
            served=chosen.served,
            value_bound=p1.total - p1.unserved_lb,
            cost=(cost - cost % w.cost) // w.cost if cost >= 0 else 0,
            cost_bound=-(-(cost_lb - d.max_busy) // w.cost) if cost_lb > d.max_busy else 0,
            work=p1.work + p2.work,
            wall_capped=p1.capped or p2.capped,
        )

    def _run(
        self, settings: SolverSettings, limit: float, work: float, gap: int = 0
    ) -> tuple[cp_model.CpSolver, SolveStatus, float, bool]:
        """One CP-SAT call: (solver, status, deterministic time used, stopped by the wall
        clock rather than by the work limit or a proof)."""
        solver = cp_model.CpSolver()
        p = solver.parameters
        p.max_time_in_seconds = max(0.01, limit)
        p.max_deterministic_time = max(0.01, work)
        if gap:
            p.absolute_gap_limit = gap
        if settings.deterministic:
            # CP-SAT's multi-worker search is only reproducible interleaved, and only when
            # it stops on work done (deterministic time), not on the wall clock.
            p.interleave_search = True
            # Interleaved, LNS tasks take batch slots from the LP workers that prove these
            # models; with the greedy hint they are not needed (bench/planner_bench.py
            # 3,000/150: 6.4 s -> 4.2 s; 1,000/50: work 0.32 -> 0.014).
            p.use_lns = False
        p.num_workers = settings.num_workers
        p.random_seed = settings.random_seed
        p.log_search_progress = settings.log_search_progress
        if settings.fast_presolve:
            p.cp_model_probing_level = 0
            p.symmetry_level = 0
        if settings.num_workers == 1:
            p.linearization_level = 2  # what the max_lp subsolver does, single-threaded
        elif settings.subsolvers:
            p.subsolvers.extend(settings.subsolvers)
        t0 = time.perf_counter()
        stop = _GapStop(gap) if gap else None
        status = SolveStatus.from_cp_sat(solver.status_name(solver.solve(self.model, stop)))
        if status is SolveStatus.MODEL_INVALID:
            raise RuntimeError(f"CP-SAT rejected the model: {self.model.validate()}")
        det = solver.deterministic_time
        capped = (
            status is not SolveStatus.OPTIMAL
            and det < 0.98 * p.max_deterministic_time
            and time.perf_counter() - t0 >= 0.98 * p.max_time_in_seconds
        )
        return solver, status, det, capped

    def _hint(self, solver: cp_model.CpSolver) -> None:
        self.model.clear_hints()  # type: ignore[no-untyped-call]
        take = [self.vars.take[o] for o in self.groups.live]
        guards = [g for g, _ in self._guards]
        for x in (*self.vars.serve, *take, *self.vars.requeue, *guards):
            self.model.add_hint(x, solver.boolean_value(x))

    def _hint_greedy(self, plan: GreedyPlan) -> None:
        self.model.clear_hints()  # type: ignore[no-untyped-call]
        v = self.vars
        for i, x in enumerate(v.serve):
            self.model.add_hint(x, i in plan.served)
        taken = set(plan.taken)
        for o in self.groups.live:
            self.model.add_hint(v.take[o], o in taken)
        for j, x in enumerate(v.requeue):
            self.model.add_hint(x, j in plan.requeued)
        for guard, these in self._guards:
            self.model.add_hint(guard, any(o in taken for o in these))

    def _cost_of(self, taken: set[int], requeued: set[int]) -> int:
        d, w = self.data, self.weights
        cost = sum(j.cost for i, j in enumerate(d.jobs) if i in requeued)
        cost += sum(d.options[i].drain_cost for i in taken)
        busy = sum(d.options[i].busy for i in taken)
        return w.cost * cost + busy
