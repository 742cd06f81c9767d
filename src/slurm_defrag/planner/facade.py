"""The planner facade: snapshot + policy (+ targets) -> :class:`Plan`.

Order of work, and why:

1. refuse early when ``max_concurrent_plans`` is reached (cheap, and the executor would
   refuse the plan anyway);
2. targets: given ids, else what the policy's strategies propose;
3. candidates (pruned when the full set is big, see :mod:`.candidates`);
4. solve the *relaxation without limits* part by part (:mod:`.decompose`): parts are
   independent once limits are ignored, and the relaxation's optimum is a lower bound;
5. if the combined relaxed plan respects the limits it is optimal; otherwise solve the
   whole problem with limits in one model and report the gap to the relaxed bound;
6. assemble the plan: placements, victims, actions, explanations.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from slurm_defrag.domain.cluster import ClusterSnapshot, Job, JobState
from slurm_defrag.domain.plan import Optimality, Plan, SolveStats
from slurm_defrag.domain.topology import indices_of
from slurm_defrag.errors import InputError
from slurm_defrag.gcpause import paused
from slurm_defrag.planner.assemble import assemble, empty_plan
from slurm_defrag.planner.budget import check_concurrent_plans, remaining_budget
from slurm_defrag.planner.build import Indexed, target_specs, to_problem, worth_ceilings
from slurm_defrag.planner.candidates import CandidateBuilder, Candidates, TargetSpec
from slurm_defrag.planner.deadline import Deadline
from slurm_defrag.planner.decompose import Part, split
from slurm_defrag.planner.nodes import JobTable
from slurm_defrag.policy.file import Policy
from slurm_defrag.policy.limits import InMemoryPreemptionHistory, LimitError, PreemptionHistory
from slurm_defrag.policy.protections import compile_protections
from slurm_defrag.solver.fallback import greedy_result
from slurm_defrag.solver.model import PlannerModel, Weights
from slurm_defrag.solver.parameters import SolverSettings
from slurm_defrag.solver.problem import OptionKind, ProblemData
from slurm_defrag.solver.result import SolveResult, SolveStatus


def make_plan(
    snapshot: ClusterSnapshot,
    policy: Policy,
    targets: Sequence[str] | None = None,
    history: PreemptionHistory | None = None,
    now: datetime | None = None,
    previous: Plan | None = None,
) -> Plan:
    """Plan requeues/drains that start ``targets`` (default: the strategies' proposals).

    ``previous``: an earlier plan (the service passes its last one) whose placements the
    first solution keeps where they still fit: a warm start, not a constraint.

    Never talks to Slurm. Raises :class:`InputError` for target ids that are not pending
    GPU jobs of the snapshot.
    """
    with paused():
        return _make_plan(snapshot, policy, targets, history, now, previous)


def _make_plan(
    snapshot: ClusterSnapshot,
    policy: Policy,
    targets: Sequence[str] | None,
    history: PreemptionHistory | None,
    now: datetime | None,
    previous: Plan | None,
) -> Plan:
    t0 = time.perf_counter()
    settings = policy.solver
    clock = Deadline(t0, settings.max_time_in_seconds)
    now = now or snapshot.taken_at
    history = history if history is not None else InMemoryPreemptionHistory()
    try:
        check_concurrent_plans(policy.limits, history)
    except LimitError as exc:
        return empty_plan(snapshot, "refused", str(exc))
    jobs = _target_jobs(snapshot, policy, targets)
    specs, skipped = target_specs(snapshot, jobs)
    if not specs:
        why = (
            "no pending job is blocked by fragmentation (none is falsely starved)"
            if not jobs
            else "no target has a fixed per-node shape (spreadable --gpus=N requests are "
            "served by any free GPUs)"
        )
        return empty_plan(snapshot, "empty", why, skipped=skipped)

    table = _job_table(snapshot, policy, now)
    max_gpus = max((n.gpu_count for n in snapshot.nodes), default=0)
    cost_weight = sum(s.nodes for s in specs) * max_gpus + 1
    builder = CandidateBuilder(
        snapshot, specs, table, policy.drain, now, cost_weight, clock, settings.max_options
    )
    infos = builder.eligibility()
    full = builder.count_full(infos)
    prune = settings.prune == "always" or (
        settings.prune == "auto" and full > settings.full_model_max_options
    )
    cands = builder.build(prune, infos)
    ceilings = worth_ceilings(specs, now, policy.cost)

    def index(c: Candidates) -> Indexed:
        users = {snapshot.job_by_id[table.ids[j]].user for o in c.options for j in o.victims}
        owners = {s.job.user for s in specs}
        budget = remaining_budget(policy.limits, history, now, users, owners)
        return to_problem(snapshot, specs, c, table, budget, now, ceilings)

    ix = index(cands)

    deadline = clock.end("solve")
    fallback = prune and full <= settings.exact_fallback_max_options and not clock.cut
    if clock.over("problem"):  # no time to build and solve a model: the greedy plan
        result, stats = _greedy_only(ix, _preferred(ix, specs, previous), clock, deadline, prune)
    else:
        result, maybe = _solve(
            ix.data,
            settings,
            deadline,
            prune,
            then_limited=not fallback,
            prefer=_preferred(ix, specs, previous),
        )
        if maybe is not None:
            stats = maybe
        elif clock.over("candidates"):
            # No time left to build the unpruned candidates: the limited model on the
            # pruned ones, as for a big problem (another run may have had the time).
            clock.note("unpruned re-solve")
            result, stats = _solve_limited(
                ix.data, settings, deadline, prune, result, True, _preferred(ix, specs, previous)
            )
        else:
            # Limits bind, and pruning is only proven exact without them: small enough to
            # solve the unpruned model with limits instead (its own bounds are exact). The
            # pruned relaxation's bounds hold too (in absolute units: value, GPU-hours).
            cands = builder.build(False, infos)
            ix = index(cands)
            result, stats = _solve_limited(
                ix.data, settings, deadline, False, result, False, _preferred(ix, specs, previous)
            )
            prune = False
    stats = stats.model_copy(update={"full_options": full, "runtime_s": time.perf_counter() - t0})
    if prune and stats.optimality == "proven" and any(c is not None for c in ceilings):
        # Pruning keeps each class's cheapest nodes before the ceilings drop options (a
        # cheap drain that starts the target too late may have displaced an affordable
        # requeue): the plan is optimal among the kept options, not proven overall.
        stats = stats.model_copy(update={"optimality": "within-candidates"})
    return assemble(
        snapshot, policy, specs, skipped, cands, table, ix, result, stats, now, cost_weight, clock
    )


def _job_table(snapshot: ClusterSnapshot, policy: Policy, now: datetime) -> JobTable:
    return JobTable(
        snapshot,
        now,
        policy.cost,
        compile_protections(policy.protections, now),
        {n.name: i for i, n in enumerate(snapshot.nodes)},
    )


def _greedy_only(
    ix: Indexed, prefer: frozenset[int], clock: Deadline, deadline: float, prune: bool
) -> tuple[SolveResult, SolveStats]:
    """The greedy plan alone, when no time is left to build and solve a model."""
    clock.note("solver")
    result = greedy_result(ix.data, True, prefer, deadline)
    if time.perf_counter() > deadline:  # it stopped on the clock: targets left untried
        clock.note("greedy")
    stats = _stats(
        result, ix.data, Weights.for_problem(ix.data), "feasible", len(split(ix.data)), prune
    )
    return result, stats


def _target_jobs(
    snapshot: ClusterSnapshot, policy: Policy, targets: Sequence[str] | None
) -> list[Job]:
    if targets is None:
        seen: dict[str, None] = {}
        for strategy in policy.build_strategies():
            for c in strategy.propose(snapshot):
                seen.setdefault(c.job_id)
        targets = list(seen)
    out = []
    for jid in targets:
        job = snapshot.job_by_id.get(jid)
        if job is None:
            raise InputError(f"--target {jid}: no such job in the snapshot")
        if job.unreadable:
            # what it asks for is unknown: planning for it would be a guess (issue #40)
            raise InputError(
                f"--target {jid}: its Slurm record could not be read whole, so it is never "
                f"planned for ({job.unreadable})"
            )
        if job.state != JobState.PENDING or job.request is None:
            raise InputError(f"--target {jid}: not a pending GPU job (state {job.state.value})")
        out.append(job)
    return out


def _preferred(ix: Indexed, specs: list[TargetSpec], previous: Plan | None) -> frozenset[int]:
    """Options placing a share exactly as ``previous`` did (same target, node, GPUs, mode)."""
    if previous is None:
        return frozenset()
    old = {
        (t.job_id, p.node, p.gpus, p.mode == "drain")
        for t in previous.targets
        if t.served
        for p in t.placements
    }
    if not old:
        return frozenset()
    names = ix.node_names
    return frozenset(
        i
        for i, o in enumerate(ix.data.options)
        if (specs[o.target].job.id, names[o.node], indices_of(o.mask), o.kind is OptionKind.DRAIN)
        in old
    )


def _solve(
    data: ProblemData,
    settings: SolverSettings,
    deadline: float,
    pruned: bool,
    then_limited: bool = True,
    prefer: frozenset[int] = frozenset(),
) -> tuple[SolveResult, SolveStats | None]:
    """The relaxation part by part; if its plan breaks a limit, the limited model
    (``then_limited=False``: the relaxation and no stats instead, the caller solves)."""
    weights = Weights.for_problem(data)
    parts = split(data)
    if not data.options:
        res = _nothing(data, weights)
        return res, _stats(res, data, weights, "proven", len(parts), pruned)

    # 1. relaxation (no limits), part by part. The budget follows the work: each part
    # gets the share of it that its options are of all options (an even split gave the
    # one big part 0.9 s of 60 s next to 150 one-target parts); a part without options
    # has nothing to decide. Work (deterministic time) is split up front, so the split
    # does not depend on how fast earlier parts ran: same input, same limits, same plan.
    lim = data.limits
    limited = (
        lim.max_victims is not None
        or lim.max_lost is not None
        or any(c is not None for c in lim.user_caps)
        or any(c is not None for c in lim.user_lost_caps)
        or bool(lim.served_caps)
    )
    work = settings.max_deterministic_time / (2 if limited else 1)
    relax_end = deadline
    if limited:  # limits may bind: keep half the budget for the limited model
        relax_end = time.perf_counter() + (deadline - time.perf_counter()) / 2
    sizes = [len(p.data.options) for p in parts]
    todo, total = sum(sizes), sum(sizes)
    results: list[tuple[Part, SolveResult]] = []
    for part, size in zip(parts, sizes, strict=True):
        if not size:
            results.append((part, _nothing(part.data, weights)))
            continue
        left = max(0.05, (relax_end - time.perf_counter()) * size / todo)
        todo -= size
        mine = frozenset(k for k, o in enumerate(part.options) if o in prefer)
        res = PlannerModel(part.data, weights, with_limits=False).solve(
            settings, left, work * size / total, mine
        )
        if not res.has_solution:  # cannot happen (the greedy plan), but never crash on it
            res = _nothing(part.data, weights, proven=False)
        results.append((part, res))
    relaxed = _combine(results)
    all_optimal = relaxed.status is SolveStatus.OPTIMAL
    if _within_limits(data, relaxed.taken, relaxed.requeued):
        # Optimal for the relaxation and feasible: optimal. Pruning keeps the relaxed
        # optimum (exchange argument), so this holds for the unpruned problem too.
        return relaxed, _stats(
            relaxed, data, weights, "proven" if all_optimal else "feasible", len(parts), pruned
        )

    if not then_limited:
        return relaxed, None
    return _solve_limited(data, settings, deadline, pruned, relaxed, True, prefer)


def _solve_limited(
    data: ProblemData,
    settings: SolverSettings,
    deadline: float,
    pruned: bool,
    relaxed: SolveResult,
    same_data: bool,
    prefer: frozenset[int] = frozenset(),
) -> tuple[SolveResult, SolveStats]:
    """Limits bind: one model with limits, bounded by the relaxation ``relaxed`` (of the
    same candidates, or of the pruned ones: then only its absolute bounds are used)."""
    weights = Weights.for_problem(data)
    parts = len(split(data))
    left = max(0.1, deadline - time.perf_counter())
    work = settings.max_deterministic_time / 2
    res = PlannerModel(data, weights, with_limits=True).solve(settings, left, work, prefer)
    # The limited model's own bounds hold for its candidates only; the relaxation's hold
    # for the unpruned problem (pruning keeps the relaxed optimum).
    total = sum(t.value for t in data.targets)
    value_ub = relaxed.value_bound
    # composite bounds are in this data's weights: only comparable on the same data
    lower = relaxed.bound or 0 if same_data else weights.value * (total - (value_ub or 0))
    if not pruned:
        lower = max(lower, res.bound or 0)
        value_ub = min(value_ub or 0, res.value_bound or 0)
    if not res.has_solution:
        res = _nothing(data, weights, proven=False)
        res = replace(res, bound=lower, value_bound=value_ub)
        return res, _stats(res, data, weights, "none", parts, pruned)
    # Cost bounds hold for plans serving at least their plan's value. The relaxation's
    # applies when this plan serves as much (a limited plan is a relaxed plan); the
    # limited model's own only without pruning. Else the only proven bound is 0.
    served_value = sum(data.targets[t].value for t in res.served)
    relaxed_value = sum(data.targets[t].value for t in relaxed.served) if same_data else None
    bounds = [0]
    if not pruned and res.cost_bound is not None:
        bounds.append(res.cost_bound)
    if (
        relaxed.cost_bound is not None
        and relaxed_value is not None
        and (served_value >= relaxed_value)
    ):
        bounds.append(relaxed.cost_bound)
    cost_lb = max(bounds)
    res = replace(
        res,
        bound=lower,
        value_bound=value_ub,
        cost_bound=cost_lb,
        work=res.work + relaxed.work,
        wall_capped=res.wall_capped or relaxed.wall_capped,
    )
    grade: Optimality
    if res.status is SolveStatus.OPTIMAL and (not pruned or res.objective == lower):
        grade = "proven"
    elif res.status is SolveStatus.OPTIMAL:
        grade = "within-candidates"
    else:
        grade = "feasible"
    return res, _stats(res, data, weights, grade, parts, pruned)


def _nothing(data: ProblemData, w: Weights, proven: bool = True) -> SolveResult:
    """The empty plan of a part with no options (proven: nothing can be served)."""
    unserved = _all_unserved(data, w)
    total = sum(t.value for t in data.targets)
    return SolveResult(
        SolveStatus.OPTIMAL if proven else SolveStatus.FEASIBLE,
        objective=unserved,
        bound=unserved if proven else 0,
        value_bound=0 if proven else total,
        cost=0,
        cost_bound=0,
    )


def _combine(results: list[tuple[Part, SolveResult]]) -> SolveResult:
    """The parts' plans and bounds, in the whole problem's indices (bounds add up: the
    parts are independent once limits are ignored)."""
    taken: list[int] = []
    requeued: list[int] = []
    served: list[int] = []
    objective = bound = value_ub = cost = 0
    cost_lb: int | None = 0
    optimal, capped, work = True, False, 0.0
    for part, res in results:
        optimal = optimal and res.status is SolveStatus.OPTIMAL
        capped = capped or res.wall_capped
        work += res.work
        objective += res.objective or 0
        bound += res.bound or 0
        value_ub += res.value_bound or 0
        cost += res.cost or 0
        cost_lb = None if cost_lb is None or res.cost_bound is None else (cost_lb + res.cost_bound)
        taken += [part.options[o] for o in res.taken]
        requeued += [part.jobs[j] for j in res.requeued]
        served += [part.targets[t] for t in res.served]
    return SolveResult(
        SolveStatus.OPTIMAL if optimal else SolveStatus.FEASIBLE,
        objective,
        bound,
        0.0,
        tuple(sorted(taken)),
        tuple(sorted(requeued)),
        tuple(sorted(served)),
        value_ub,
        cost,
        cost_lb,
        work,
        capped,
    )


def _all_unserved(data: ProblemData, w: Weights) -> int:
    return w.value * sum(t.value for t in data.targets)


def _within_limits(data: ProblemData, taken: Sequence[int], requeued: Sequence[int]) -> bool:
    """Does the plan (taken options, requeued jobs) keep every limit, counted as the
    limited model counts them?"""
    return _within_plan_limits(data, requeued) and _within_served_caps(data, taken)


def _within_plan_limits(data: ProblemData, requeued: Sequence[int]) -> bool:
    """The plan's victim and lost-work limits, in total and per victim's user."""
    lim = data.limits
    if lim.max_victims is not None and len(requeued) > lim.max_victims:
        return False
    if lim.max_lost is not None and sum(data.jobs[j].lost for j in requeued) > lim.max_lost:
        return False
    for u, cap in enumerate(lim.user_caps):
        if cap is not None and sum(1 for j in requeued if data.jobs[j].user == u) > cap:
            return False
    for u, lost in enumerate(lim.user_lost_caps):
        if (
            lost is not None
            and sum(data.jobs[j].lost for j in requeued if data.jobs[j].user == u) > lost
        ):
            return False
    return True


def _within_served_caps(data: ProblemData, taken: Sequence[int]) -> bool:
    """The beneficiary caps: other users' jobs requeued for each capped user's targets."""
    lim = data.limits
    served: dict[int, set[int]] = {}
    for o in taken:
        c = data.target_cap[data.options[o].target]
        if c is None:
            continue
        user = lim.served_caps[c].user
        served.setdefault(c, set()).update(
            j for j in data.options[o].victims if data.users[data.jobs[j].user] != user
        )
    for c, js in served.items():
        left = lim.served_caps[c]
        if left.requeues is not None and len(js) > left.requeues:
            return False
        if left.lost is not None and sum(data.jobs[j].lost for j in js) > left.lost:
            return False
    return True


def _stats(
    res: SolveResult, data: ProblemData, w: Weights, grade: Optimality, parts: int, pruned: bool
) -> SolveStats:
    from slurm_defrag.domain.units import MILLI

    obj, bound = res.objective, res.bound
    gap = None
    if obj is not None and bound is not None:
        gap = (obj - bound) / max(1, abs(obj))
    served = set(res.served)
    value = sum(t.value for i, t in enumerate(data.targets) if i in served)
    cost = None if res.cost is None else res.cost / MILLI
    cost_lb = None if res.cost_bound is None else res.cost_bound / MILLI
    cost_gap = None
    if cost is not None and cost_lb is not None:
        cost_gap = 0.0 if cost <= cost_lb else (cost - cost_lb) / cost
    return SolveStats(
        status=res.status.value if data.options else "NOT_SOLVED",
        optimality=grade,
        objective=None if obj is None else float(obj),
        bound=None if bound is None else float(bound),
        gap=gap,
        served=len(served),
        served_upper_bound=_count_bound(data, res.value_bound),
        value=value,
        value_upper_bound=res.value_bound,
        cost_gpu_hours=cost,
        cost_lower_bound_gpu_hours=cost_lb,
        cost_gap=cost_gap,
        work=round(res.work, 3),
        deterministic=not res.wall_capped,
        runtime_s=res.runtime_s,
        components=parts,
        options=len(data.options),
        pruned=pruned,
    )


def _count_bound(data: ProblemData, value_ub: int | None) -> int | None:
    """Most targets any plan can serve: only targets with an option on enough nodes can
    be served at all, and k of them are worth at least their k smallest values together,
    so no more than fit in the proven value bound."""
    if value_ub is None:
        return None
    values = sorted(
        t.value
        for i, t in enumerate(data.targets)
        if len({data.options[o].node for o in data.target_options[i]}) >= t.nodes
    )
    k = total = 0
    for v in values:
        if total + v > value_ub:
            break
        total += v
        k += 1
    return k


__all__ = ["Indexed", "make_plan"]
