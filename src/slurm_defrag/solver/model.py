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

import time
from dataclasses import dataclass

from ortools.sat.python import cp_model

from slurm_defrag.domain.topology import indices_of
from slurm_defrag.solver.problem import OptionKind, ProblemData
from slurm_defrag.solver.result import SolveResult, SolveStatus
from slurm_defrag.solver.settings import SolverSettings


@dataclass(frozen=True, slots=True)
class Weights:
    """Objective weights making the three terms lexicographic (exact integer arithmetic)."""

    value: int
    cost: int

    @classmethod
    def for_problem(cls, data: ProblemData) -> Weights:
        cost = data.max_busy + 1
        worst = sum(j.cost for j in data.jobs) + sum(
            o.drain_cost for o in data.options if o.kind is OptionKind.DRAIN)
        return cls(value=cost * worst + data.max_busy + 1, cost=cost)


class _Variables:
    def __init__(self, model: cp_model.CpModel, data: ProblemData) -> None:
        self.serve = [model.new_bool_var(f"serve[{t.job_id}]") for t in data.targets]
        self.take = []
        for o in data.options:
            t, n = data.targets[o.target], data.nodes[o.node]
            gpus = ",".join(map(str, indices_of(o.mask)))
            self.take.append(model.new_bool_var(f"take[{t.job_id}@{n.name}:{gpus}:{o.kind}]"))
        self.requeue = [model.new_bool_var(f"requeue[{j.job_id}]") for j in data.jobs]
        self.domain: dict[tuple[int, int], cp_model.IntVar] = {}
        for ti, t in enumerate(data.targets):
            if t.same_domain:
                for d in sorted({data.nodes[data.options[o].node].domain or 0
                                 for o in data.target_options[ti]}):
                    self.domain[(ti, d)] = model.new_bool_var(
                        f"domain[{t.job_id}:{data.domains[d]}]")


class _Constraints:
    def __init__(self, model: cp_model.CpModel, data: ProblemData, v: _Variables,
                 with_limits: bool) -> None:
        self._m, self._d, self._v = model, data, v
        self._with_limits = with_limits

    def add_all(self) -> None:
        self._shares_per_target()
        self._one_share_per_node()
        self._gpu_use()
        self._host_capacity()
        self._no_gratuitous_requeue()
        self._drained_node_exclusive()
        self._same_domain()
        if self._with_limits:
            self._limits()

    def _shares_per_target(self) -> None:
        """A served target takes exactly one block on each of its ``nodes`` nodes."""
        for t, target in enumerate(self._d.targets):
            takes = [self._v.take[o] for o in self._d.target_options[t]]
            self._m.add(sum(takes) == target.nodes * self._v.serve[t])

    def _one_share_per_node(self) -> None:
        """A multi-node target's shares are on distinct nodes."""
        for t, target in enumerate(self._d.targets):
            if target.nodes == 1:
                continue  # already at most one option in total
            by_node: dict[int, list[int]] = {}
            for o in self._d.target_options[t]:
                by_node.setdefault(self._d.options[o].node, []).append(o)
            for opts in by_node.values():
                if len(opts) > 1:
                    self._m.add_at_most_one(self._v.take[o] for o in opts)

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
        for n, opts in enumerate(self._d.node_options):
            for g in range(self._d.nodes[n].gpu_count):
                using = [self._v.take[o] for o in opts if self._d.options[o].mask >> g & 1]
                if not using:
                    continue
                owner = holder.get((n, g))
                drains = any(self._d.options[o].kind is OptionKind.DRAIN
                             for o in opts if self._d.options[o].mask >> g & 1)
                if owner is None or drains:
                    # free GPU, or a drain may wait for its (possibly protected) holder
                    if len(using) > 1:
                        self._m.add_at_most_one(using)
                    if owner is not None:
                        for o in opts:
                            opt = self._d.options[o]
                            if opt.mask >> g & 1 and opt.kind is OptionKind.REQUEUE:
                                self._m.add_implication(self._v.take[o],
                                                        self._v.requeue[owner])
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
            opts = [o for o in self._d.node_options[n]
                    if self._d.options[o].kind is OptionKind.REQUEUE]
            targets = [self._d.targets[self._d.options[o].target] for o in opts]
            holders = [self._d.jobs[j] for j in on_node.get(n, [])]
            self._fits(node.cpus_free, opts, [t.cpus for t in targets],
                       on_node.get(n, []), [j.cpus for j in holders])
            self._fits(node.memory_free, opts, [t.memory for t in targets],
                       on_node.get(n, []), [j.memory for j in holders])

    def _fits(self, free: int | None, opts: list[int], asks: list[int], jobs: list[int],
              held: list[int]) -> None:
        if free is None or sum(asks) <= free:
            return  # never binds
        self._m.add(sum(a * self._v.take[o] for o, a in zip(opts, asks, strict=True))
                    <= free + sum(h * self._v.requeue[j] for j, h in zip(jobs, held, strict=True)))

    def _no_gratuitous_requeue(self) -> None:
        """A job is requeued only for a block that is taken: victims are minimal even when
        a job's cost is zero."""
        for j, opts in enumerate(self._d.job_options):
            if not opts:
                self._m.add(self._v.requeue[j] == 0)
                continue
            self._m.add_bool_or([self._v.take[o] for o in opts]).only_enforce_if(
                self._v.requeue[j])

    def _drained_node_exclusive(self) -> None:
        """A node drained for one share hosts no other share of the plan."""
        for opts in self._d.node_options:
            drains = [o for o in opts if self._d.options[o].kind is OptionKind.DRAIN]
            for o in drains:
                others = [self._v.take[p].Not() for p in opts if p != o]
                if others:
                    self._m.add_bool_and(others).only_enforce_if(self._v.take[o])

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
        """Victims per plan (already net of the hourly budget), GPU-hours lost, per user."""
        lim, req = self._d.limits, self._v.requeue
        if lim.max_victims is not None:
            self._m.add(sum(req) <= lim.max_victims)
        if lim.max_lost is not None:
            self._m.add(sum(j.lost * req[i] for i, j in enumerate(self._d.jobs)) <= lim.max_lost)
        for u, cap in enumerate(lim.user_caps):
            if cap is None:
                continue
            mine = [req[i] for i, j in enumerate(self._d.jobs) if j.user == u]
            if len(mine) > cap:
                self._m.add(sum(mine) <= cap)


class _Objective:
    def __init__(self, model: cp_model.CpModel, data: ProblemData, v: _Variables,
                 w: Weights) -> None:
        self._m, self._d, self._v, self._w = model, data, v, w
        d = data
        self.unserved = sum(t.value * (1 - v.serve[i]) for i, t in enumerate(d.targets))
        cost = sum(j.cost * v.requeue[i] for i, j in enumerate(d.jobs) if j.cost)
        drain = sum(o.drain_cost * v.take[i] for i, o in enumerate(d.options) if o.drain_cost)
        busy = sum(o.busy * v.take[i] for i, o in enumerate(d.options) if o.busy)
        self.cost = w.cost * (cost + drain) + busy

    def value_phase(self) -> None:
        """Phase 1: serve the most target value."""
        self._m.minimize(self.unserved)

    def cost_phase(self, unserved: int) -> None:
        """Phase 2: with at most ``unserved`` value left unserved, the least cost."""
        self._m.add(self.unserved <= unserved)
        self._m.minimize(self.cost)


class PlannerModel:
    """Build once, solve once. ``with_limits=False`` gives the relaxation the planner uses
    to decompose and to bound."""

    def __init__(self, data: ProblemData, weights: Weights, with_limits: bool = True) -> None:
        self.data = data
        self.weights = weights
        self.model = cp_model.CpModel()
        self.vars = _Variables(self.model, data)
        _Constraints(self.model, data, self.vars, with_limits).add_all()
        self.objective = _Objective(self.model, data, self.vars, weights)

    def solve(self, settings: SolverSettings, time_limit: float | None = None) -> SolveResult:
        """Both phases within ``time_limit`` seconds (default: the settings')."""
        limit = time_limit if time_limit is not None else settings.max_time_in_seconds
        t0 = time.perf_counter()
        self.objective.value_phase()
        s1, st1 = self._run(settings, limit / 2)
        if st1 not in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE):
            return SolveResult(status=st1, runtime_s=time.perf_counter() - t0)
        unserved, unserved_bound = round(s1.objective_value), round(s1.best_objective_bound)
        self._hint(s1)
        self.objective.cost_phase(unserved)
        left = max(0.05, limit - (time.perf_counter() - t0))
        s2, st2 = self._run(settings, left)
        runtime = time.perf_counter() - t0
        if st2 not in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE):
            # Cannot happen with the hint of phase 1, except when time runs out first:
            # phase 1's plan is still a plan.
            s2, st2 = s1, SolveStatus.FEASIBLE
            cost, cost_bound = self._cost_of(s1), 0
        else:
            cost, cost_bound = round(s2.objective_value), round(s2.best_objective_bound)
        proven = st1 is SolveStatus.OPTIMAL and st2 is SolveStatus.OPTIMAL
        w = self.weights.value
        # The cost bound only holds for plans leaving exactly ``unserved`` unserved.
        bound = w * unserved + cost_bound if st1 is SolveStatus.OPTIMAL else w * unserved_bound
        v = self.vars
        return SolveResult(
            status=SolveStatus.OPTIMAL if proven else SolveStatus.FEASIBLE,
            objective=w * unserved + cost,
            bound=bound,
            runtime_s=runtime,
            taken=tuple(i for i, x in enumerate(v.take) if s2.boolean_value(x)),
            requeued=tuple(i for i, x in enumerate(v.requeue) if s2.boolean_value(x)),
            served=tuple(i for i, x in enumerate(v.serve) if s2.boolean_value(x)),
        )

    def _run(self, settings: SolverSettings, limit: float) -> tuple[cp_model.CpSolver,
                                                                    SolveStatus]:
        solver = cp_model.CpSolver()
        p = solver.parameters
        p.max_time_in_seconds = max(0.01, limit)
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
        status = SolveStatus.from_cp_sat(solver.status_name(solver.solve(self.model)))
        if status is SolveStatus.MODEL_INVALID:
            raise RuntimeError(f"CP-SAT rejected the model: {self.model.validate()}")
        return solver, status

    def _hint(self, solver: cp_model.CpSolver) -> None:
        # Called once per model (before phase 2), so no earlier hints to clear.
        for x in (*self.vars.serve, *self.vars.take, *self.vars.requeue):
            self.model.add_hint(x, solver.boolean_value(x))

    def _cost_of(self, solver: cp_model.CpSolver) -> int:
        d, v, w = self.data, self.vars, self.weights
        cost = sum(j.cost for i, j in enumerate(d.jobs) if solver.boolean_value(v.requeue[i]))
        cost += sum(o.drain_cost for i, o in enumerate(d.options)
                    if solver.boolean_value(v.take[i]))
        busy = sum(o.busy for i, o in enumerate(d.options) if solver.boolean_value(v.take[i]))
        return w.cost * cost + busy
