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
from datetime import datetime

from slurm_defrag.domain.cluster import ClusterSnapshot, Job, JobState
from slurm_defrag.domain.plan import Optimality, Plan, SolveStats
from slurm_defrag.errors import InputError
from slurm_defrag.planner.assemble import assemble, empty_plan
from slurm_defrag.planner.budget import check_concurrent_plans, remaining_budget
from slurm_defrag.planner.build import Indexed, target_specs, to_problem
from slurm_defrag.planner.candidates import CandidateBuilder, Candidates
from slurm_defrag.planner.decompose import split
from slurm_defrag.planner.nodes import JobTable
from slurm_defrag.policy.file import Policy
from slurm_defrag.policy.limits import InMemoryPreemptionHistory, LimitError, PreemptionHistory
from slurm_defrag.policy.protections import compile_protections
from slurm_defrag.solver.model import PlannerModel, Weights
from slurm_defrag.solver.problem import ProblemData
from slurm_defrag.solver.result import SolveResult, SolveStatus
from slurm_defrag.solver.settings import SolverSettings


def make_plan(
    snapshot: ClusterSnapshot,
    policy: Policy,
    targets: Sequence[str] | None = None,
    history: PreemptionHistory | None = None,
    now: datetime | None = None,
) -> Plan:
    """Plan requeues/drains that start ``targets`` (default: the strategies' proposals).

    Never talks to Slurm. Raises :class:`InputError` for target ids that are not pending
    GPU jobs of the snapshot.
    """
    t0 = time.perf_counter()
    now = now or snapshot.taken_at
    history = history if history is not None else InMemoryPreemptionHistory()
    try:
        check_concurrent_plans(policy.limits, history)
    except LimitError as exc:
        return empty_plan(snapshot, "refused", str(exc))
    jobs = _target_jobs(snapshot, policy, targets)
    specs, skipped = target_specs(snapshot, jobs)
    if not specs:
        why = ("no pending job is falsely starved: nothing to defragment" if not jobs else
               "no target has a fixed per-node shape (spreadable --gpus=N requests are "
               "served by any free GPUs)")
        return empty_plan(snapshot, "empty", why, skipped=skipped)

    table = JobTable(snapshot, now, policy.cost, compile_protections(policy.protections, now),
                     {n.name: i for i, n in enumerate(snapshot.nodes)})
    max_gpus = max((n.gpu_count for n in snapshot.nodes), default=0)
    cost_weight = sum(s.nodes for s in specs) * max_gpus + 1
    builder = CandidateBuilder(snapshot, specs, table, policy.drain, now, cost_weight)
    settings = policy.solver
    infos = builder.eligibility()
    full = builder.count_full(infos)
    prune = settings.prune == "always" or (
        settings.prune == "auto" and full > settings.full_model_max_options)
    cands = builder.build(prune, infos)

    def index(c: Candidates) -> Indexed:
        users = {snapshot.job_by_id[table.ids[j]].user for o in c.options for j in o.victims}
        budget = remaining_budget(policy.limits, history, now, users)
        return to_problem(snapshot, specs, c, table, budget, now)

    ix = index(cands)

    deadline = t0 + settings.max_time_in_seconds
    result, stats = _solve(ix.data, settings, deadline, prune)
    if stats.optimality == "within-candidates" and full <= settings.exact_fallback_max_options:
        # Limits bind, and pruning is only proven exact without them: small enough to
        # solve the unpruned model instead.
        cands = builder.build(False, infos)
        ix = index(cands)
        result, stats = _solve(ix.data, settings, deadline, False)
        prune = False
    stats = stats.model_copy(update={"full_options": full,
                                     "runtime_s": time.perf_counter() - t0})
    return assemble(snapshot, policy, specs, skipped, cands, table, ix, result, stats, now,
                    cost_weight)


def _target_jobs(snapshot: ClusterSnapshot, policy: Policy,
                 targets: Sequence[str] | None) -> list[Job]:
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
        if job.state != JobState.PENDING or job.request is None:
            raise InputError(f"--target {jid}: not a pending GPU job (state {job.state.value})")
        out.append(job)
    return out


def _solve(data: ProblemData, settings: SolverSettings, deadline: float,
           pruned: bool) -> tuple[SolveResult, SolveStats]:
    weights = Weights.for_problem(data)
    parts = split(data)
    if not data.options:
        res = SolveResult(SolveStatus.OPTIMAL, objective=_all_unserved(data, weights),
                          bound=_all_unserved(data, weights))
        return res, _stats(res, data, weights, "proven", len(parts), pruned)

    # 1. relaxation (no limits), part by part
    taken: list[int] = []
    requeued: list[int] = []
    served: list[int] = []
    objective = bound = 0
    all_optimal = True
    for i, part in enumerate(parts):
        left = max(0.05, (deadline - time.perf_counter()) / (len(parts) - i + 1))
        res = PlannerModel(part.data, weights, with_limits=False).solve(settings, left)
        if not res.has_solution:
            all_optimal = False
            res = SolveResult(res.status, objective=_all_unserved(part.data, weights),
                              bound=0)
        all_optimal = all_optimal and res.status is SolveStatus.OPTIMAL
        objective += res.objective or 0
        bound += res.bound or 0
        taken += [part.options[o] for o in res.taken]
        requeued += [part.jobs[j] for j in res.requeued]
        served += [part.targets[t] for t in res.served]
    relaxed = SolveResult(SolveStatus.OPTIMAL if all_optimal else SolveStatus.FEASIBLE,
                          objective, bound, 0.0, tuple(sorted(taken)), tuple(sorted(requeued)),
                          tuple(sorted(served)))
    if _within_limits(data, relaxed.requeued):
        # Optimal for the relaxation and feasible: optimal. Pruning keeps the relaxed
        # optimum (exchange argument), so this holds for the unpruned problem too.
        return relaxed, _stats(relaxed, data, weights,
                               "proven" if all_optimal else "feasible", len(parts), pruned)

    # 2. limits bind: one model with limits, bounded below by the relaxation
    left = max(0.1, deadline - time.perf_counter())
    res = PlannerModel(data, weights, with_limits=True).solve(settings, left)
    # The limited model's own bound holds for its candidates only; the relaxation's bound
    # holds for the unpruned problem (pruning keeps the relaxed optimum).
    lower = relaxed.bound or 0
    if not pruned:
        lower = max(lower, res.bound or 0)
    if not res.has_solution:
        res = SolveResult(res.status, _all_unserved(data, weights), lower)
        return res, _stats(res, data, weights, "none", len(parts), pruned)
    res = SolveResult(res.status, res.objective, lower, res.runtime_s, res.taken,
                      res.requeued, res.served)
    grade: Optimality
    if res.status is SolveStatus.OPTIMAL and (not pruned or res.objective == lower):
        grade = "proven"
    elif res.status is SolveStatus.OPTIMAL:
        grade = "within-candidates"
    else:
        grade = "feasible"
    return res, _stats(res, data, weights, grade, len(parts), pruned)


def _all_unserved(data: ProblemData, w: Weights) -> int:
    return w.value * sum(t.value for t in data.targets)


def _within_limits(data: ProblemData, requeued: Sequence[int]) -> bool:
    lim = data.limits
    if lim.max_victims is not None and len(requeued) > lim.max_victims:
        return False
    if lim.max_lost is not None and sum(data.jobs[j].lost for j in requeued) > lim.max_lost:
        return False
    for u, cap in enumerate(lim.user_caps):
        if cap is not None and sum(1 for j in requeued if data.jobs[j].user == u) > cap:
            return False
    return True


def _stats(res: SolveResult, data: ProblemData, w: Weights, grade: Optimality, parts: int,
           pruned: bool) -> SolveStats:
    from slurm_defrag.domain.units import MILLI

    obj, bound = res.objective, res.bound
    gap = None
    cost_lb = None
    if obj is not None and bound is not None:
        gap = (obj - bound) / max(1, abs(obj))
        unserved = sum(t.value for i, t in enumerate(data.targets) if i not in set(res.served))
        rest = bound - w.value * unserved
        if rest >= 0:
            cost_lb = (rest // w.cost) / MILLI
    return SolveStats(
        status=res.status.value if data.options else "NOT_SOLVED",
        optimality=grade,
        objective=None if obj is None else float(obj),
        bound=None if bound is None else float(bound),
        gap=gap,
        cost_lower_bound_gpu_hours=cost_lb,
        runtime_s=res.runtime_s,
        components=parts,
        options=len(data.options),
        pruned=pruned,
    )


__all__ = ["Indexed", "make_plan"]
