"""Solver result -> :class:`Plan`: placements, victims, ordered Slurm actions, and words."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Literal

from slurm_defrag.domain.cluster import ClusterSnapshot, Job
from slurm_defrag.domain.plan import (
    Action,
    ActionKind,
    NodeNote,
    Placement,
    PlacementMode,
    Plan,
    SolveStats,
    TargetOutcome,
    Victim,
)
from slurm_defrag.domain.topology import indices_of
from slurm_defrag.domain.units import MILLI
from slurm_defrag.planner.build import Indexed
from slurm_defrag.planner.candidates import Candidates, TargetSpec
from slurm_defrag.planner.deadline import Deadline, unproven
from slurm_defrag.planner.explain import node_notes, request_text, unserved_reason
from slurm_defrag.planner.nodes import JobTable
from slurm_defrag.planner.protection_cost import ProtectionCosts
from slurm_defrag.policy.file import Policy
from slurm_defrag.solver.problem import OptionKind
from slurm_defrag.solver.result import SolveResult


def empty_plan(
    snapshot: ClusterSnapshot,
    status: Literal["empty", "refused"],
    reason: str,
    skipped: list[Job] | None = None,
) -> Plan:
    targets = tuple(_skipped_outcome(j) for j in skipped or [])
    return Plan(
        plan_id=_plan_id(snapshot, [], []),
        cluster=snapshot.cluster,
        taken_at=snapshot.taken_at,
        status=status,
        reason=reason,
        targets=targets,
        solver=SolveStats(status="NOT_SOLVED", optimality="none"),
        explanation=reason,
    )


def _skipped_outcome(job: Job) -> TargetOutcome:
    assert job.request is not None
    return TargetOutcome(
        job_id=job.id,
        user=job.user,
        partition=job.partition,
        request=f"{job.request.gpus} GPUs anywhere",
        value=0,
        served=False,
        explanation=f"{job.id}: not planned: a spreadable --gpus={job.request.gpus} request "
        "can use free GPUs on any nodes, so fragmentation does not block it",
    )


def _plan_id(
    snapshot: ClusterSnapshot,
    targets: list[str],
    victims: list[str],
    placements: list[str] | None = None,
) -> str:
    """Covers what the plan does: targets, victims, and where each share goes (node and
    GPUs, mode), so a preview and an enforced plan with one id place the same GPUs."""
    text = "|".join(
        [
            snapshot.cluster,
            snapshot.taken_at.isoformat(),
            *sorted(targets),
            "/",
            *sorted(victims),
            "/",
            *sorted(placements or []),
        ]
    )
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()[:8]


def assemble(
    snapshot: ClusterSnapshot,
    policy: Policy,
    specs: list[TargetSpec],
    skipped: list[Job],
    cands: Candidates,
    table: JobTable,
    ix: Indexed,
    result: SolveResult,
    stats: SolveStats,
    now: datetime,
    cost_weight: int,
    clock: Deadline | None = None,
) -> Plan:
    clock = clock if clock is not None else Deadline.unlimited()
    served = set(result.served)
    victim_ids = [ix.job_ids[j] for j in result.requeued]
    shares = _shares(specs, ix, result)
    plan_id = _plan_id(snapshot, [specs[t].job.id for t in sorted(served)], victim_ids, shares)
    # Targets by value, highest first: actions and cost attribution follow that order.
    order = sorted(range(len(specs)), key=lambda t: -specs[t].value)
    by_target, first_for, users_of = _attribution(specs, ix, result, order)
    outcomes, chosen_nodes = _target_outcomes(specs, ix, order, by_target, first_for, served, now)
    actions = _actions(outcomes, f"defrag-{plan_id}", f"slurm-defrag:{plan_id}")
    victims = [_victim(snapshot, table, ix, j, users_of, outcomes) for j in result.requeued]
    # Explanations need the whole picture (chosen costs), so they come last.
    final = _explained(
        snapshot, policy, specs, cands, table, ix, outcomes, chosen_nodes, cost_weight, clock
    )
    final.extend(_skipped_outcome(j) for j in skipped)
    total_cost = (
        sum(v.cost_gpu_hours for v in victims)
        + sum(ix.data.options[o].drain_cost for o in result.taken) / MILLI
    )
    n_served = sum(1 for o in final if o.served)
    stats = unproven(stats, clock.cut)
    summary = _summary(plan_id, n_served, len(specs), victims, total_cost, stats)
    return Plan(
        plan_id=plan_id,
        cluster=snapshot.cluster,
        taken_at=snapshot.taken_at,
        status="ok" if n_served else "empty",
        reason="" if n_served else "no target can be served (see targets)",
        targets=tuple(final),
        victims=tuple(victims),
        actions=tuple(actions),
        total_cost_gpu_hours=total_cost,
        total_lost_gpu_hours=sum(v.lost_gpu_hours for v in victims),
        solver=stats,
        explanation="\n".join([summary, *(o.explanation for o in final)]),
    )


def _shares(specs: list[TargetSpec], ix: Indexed, result: SolveResult) -> list[str]:
    """Where each taken option puts its target (for the plan id)."""
    shares = []
    for o in result.taken:
        opt = ix.data.options[o]
        gpus = ",".join(map(str, indices_of(opt.mask)))
        shares.append(f"{specs[opt.target].job.id}@{ix.node_names[opt.node]}:{gpus}:{opt.kind}")
    return shares


def _attribution(
    specs: list[TargetSpec], ix: Indexed, result: SolveResult, order: list[int]
) -> tuple[dict[int, list[int]], dict[int, int], dict[int, list[str]]]:
    """The taken options of each target; for each victim, the first target (in value
    order) charged its cost, and the ids of every target it is requeued for."""
    data = ix.data
    by_target: dict[int, list[int]] = {t: [] for t in range(len(specs))}
    for o in result.taken:
        by_target[data.options[o].target].append(o)
    first_for: dict[int, int] = {}
    users_of: dict[int, list[str]] = {}
    for t in order:
        for o in by_target[t]:
            for j in data.options[o].victims:
                first_for.setdefault(j, t)
                users_of.setdefault(j, []).append(specs[t].job.id)
    return by_target, first_for, users_of


def _target_outcomes(
    specs: list[TargetSpec],
    ix: Indexed,
    order: list[int],
    by_target: dict[int, list[int]],
    first_for: dict[int, int],
    served: set[int],
    now: datetime,
) -> tuple[list[TargetOutcome], dict[int, set[str]]]:
    """Each target's placements (by node name) and cost, in value order; and the nodes
    chosen for each."""
    data = ix.data
    outcomes: list[TargetOutcome] = []
    chosen_nodes: dict[int, set[str]] = {}
    for t in order:
        placements = []
        cost = 0.0
        for o in sorted(by_target[t], key=lambda o: ix.node_names[data.options[o].node]):
            opt = data.options[o]
            placements.append(_placement(ix, o, now))
            cost += opt.drain_cost / MILLI
            cost += sum(data.jobs[j].cost for j in opt.victims if first_for.get(j) == t) / MILLI
        chosen_nodes[t] = {p.node for p in placements}
        outcomes.append(_outcome(t, specs[t], placements, cost, t in served, now))
    return outcomes, chosen_nodes


def _placement(ix: Indexed, o: int, now: datetime) -> Placement:
    opt = ix.data.options[o]
    mode: PlacementMode = (
        "drain" if opt.kind is OptionKind.DRAIN else ("requeue" if opt.victims else "free")
    )
    return Placement(
        node=ix.node_names[opt.node],
        gpus=indices_of(opt.mask),
        mode=mode,
        victims=tuple(ix.job_ids[j] for j in opt.victims),
        blockers=opt.blockers,
        free_at=now + timedelta(seconds=opt.wait_s) if mode == "drain" else None,
        idle_gpu_hours=opt.drain_cost / MILLI,
    )


def _victim(
    snapshot: ClusterSnapshot,
    table: JobTable,
    ix: Indexed,
    j: int,
    users_of: dict[int, list[str]],
    outcomes: list[TargetOutcome],
) -> Victim:
    jid = ix.job_ids[j]
    job = snapshot.job_by_id[jid]
    c = table.costs[table.index[jid]]
    for_t = tuple(dict.fromkeys(users_of.get(j, [])))
    return Victim(
        job_id=jid,
        name=job.name,
        user=job.user,
        account=job.account,
        partition=job.partition,
        qos=job.qos,
        gpus={n: tuple(sorted(i)) for n, i in sorted(job.gpus.items())},
        gpu_count=job.gpu_count,
        since=c.since,
        since_source=c.since_source,
        lost_gpu_hours=c.lost_gpu_hours,
        weight=c.weight,
        cost_gpu_hours=c.cost,
        for_targets=for_t,
        reason=_victim_reason(job, for_t, outcomes, c.since_source),
    )


def _explained(
    snapshot: ClusterSnapshot,
    policy: Policy,
    specs: list[TargetSpec],
    cands: Candidates,
    table: JobTable,
    ix: Indexed,
    outcomes: list[TargetOutcome],
    chosen_nodes: dict[int, set[str]],
    cost_weight: int,
    clock: Deadline,
) -> list[TargetOutcome]:
    """The outcomes with their explanation and node notes."""
    waived = ProtectionCosts(snapshot, cands, table)
    caps = {c.user: c for c in ix.data.limits.served_caps}
    index = {s.job.id: i for i, s in enumerate(specs)}
    final = []
    for out in outcomes:
        t = index[out.job_id]
        unexamined = cands.info[t].unexamined
        notes: tuple[NodeNote, ...] = ()
        if unexamined:  # no candidates were built: nothing to explain but that
            text = f"{out.job_id} ({out.request}): not served: not examined: {unexamined}"
        elif clock.over("explain"):
            # Node notes and reasons ask the candidates more questions (node states on a
            # cluster the candidate stage did not finish): past the cap, the plan only.
            clock.note("explanations")
            text = (
                _served_text(out, ())
                if out.served
                else f"{out.job_id} ({out.request}): not served (explanation cut short "
                "by the plan's wall cap)"
            )
        else:
            notes = node_notes(snapshot, specs[t], cands, table, t, chosen_nodes[t], cost_weight)
            if out.served:
                text = _served_text(out, notes)
            else:
                text = unserved_reason(
                    snapshot, policy, specs[t], cands, table, t, notes, caps.get(out.user)
                )
            text += waived.sentence(specs[t], t, out.cost_gpu_hours if out.served else None)
        final.append(out.model_copy(update={"explanation": text, "node_notes": notes}))
    return final


def _summary(
    plan_id: str,
    n_served: int,
    n_targets: int,
    victims: list[Victim],
    total_cost: float,
    stats: SolveStats,
) -> str:
    summary = (
        f"Plan {plan_id}: serves {n_served} of {n_targets} target(s), requeues "
        f"{len(victims)} job(s) losing {sum(v.lost_gpu_hours for v in victims):.2f} "
        f"GPU-hours (cost {total_cost:.2f}); solver {stats.status}, "
        f"optimality {stats.optimality}."
    )
    if stats.cut_short:
        summary += f" Cut short: {', '.join(stats.cut_short)} (no bound is proven)."
    return summary


def _outcome(
    t: int, spec: TargetSpec, placements: list[Placement], cost: float, served: bool, now: datetime
) -> TargetOutcome:
    mode: PlacementMode | None = None
    start = None
    if served:
        modes = {p.mode for p in placements}
        mode = "drain" if "drain" in modes else "requeue" if "requeue" in modes else "free"
        start = max([now] + [p.free_at for p in placements if p.free_at is not None])
    job = spec.job
    return TargetOutcome(
        job_id=job.id,
        user=job.user,
        partition=job.partition,
        request=request_text(spec),
        value=spec.value,
        served=served,
        mode=mode,
        placements=tuple(placements),
        cost_gpu_hours=cost,
        expected_start=start,
        explanation="",
    )


def _actions(outcomes: list[TargetOutcome], resv: str, tag: str) -> list[Action]:
    """Per served target, in value order: see docs/planner.md "Actions"."""
    out: list[Action] = []
    requeued: set[str] = set()

    def add(kind: ActionKind, reason: str, **kw: object) -> None:
        out.append(Action(step=len(out) + 1, kind=kind, reason=f"{tag} {reason}", **kw))

    for t in outcomes:
        if not t.served:
            continue
        nodes = tuple(p.node for p in t.placements)
        drains = [p for p in t.placements if p.mode == "drain"]
        for p in drains:
            add(
                ActionKind.DRAIN,
                f"consolidate for job {t.job_id}",
                target=t.job_id,
                nodes=(p.node,),
            )
        add(
            ActionKind.RESERVE,
            f"hold GPUs for job {t.job_id}",
            target=t.job_id,
            nodes=nodes,
            reservation=resv,
        )
        for p in t.placements:
            for v in p.victims:
                if v not in requeued:
                    requeued.add(v)
                    add(
                        ActionKind.REQUEUE,
                        f"frees GPUs for job {t.job_id}",
                        target=t.job_id,
                        job_id=v,
                        nodes=(p.node,),
                    )
        expected = max([p.free_at for p in t.placements if p.free_at is not None], default=None)
        add(
            ActionKind.WAIT_FREE,
            f"GPUs of job {t.job_id} free",
            target=t.job_id,
            nodes=nodes,
            expected_at=expected,
        )
        add(
            ActionKind.HAND_OVER,
            f"start job {t.job_id} in the reservation",
            target=t.job_id,
            job_id=t.job_id,
            reservation=resv,
        )
        for p in drains:
            add(
                ActionKind.RESUME,
                f"consolidation for job {t.job_id} done",
                target=t.job_id,
                nodes=(p.node,),
            )
        add(ActionKind.RELEASE, f"job {t.job_id} started", target=t.job_id, reservation=resv)
    return out


def _victim_reason(
    job: Job, for_t: tuple[str, ...], outcomes: list[TargetOutcome], source: str
) -> str:
    parts = []
    for o in outcomes:
        if o.job_id not in for_t:
            continue
        for p in o.placements:
            mine = sorted(set(p.gpus) & set(job.gpus.get(p.node, frozenset())))
            if mine:
                parts.append(
                    f"holds GPU {','.join(map(str, mine))} of {p.node} in the block "
                    f"for job {o.job_id}"
                )
    text = "; ".join(parts) or "frees GPUs for " + ", ".join(for_t)
    if len(job.gpus) > 1:
        text += f"; spans {len(job.gpus)} nodes, requeued whole"
    return text + ("" if source == "checkpoint" else "; no checkpoint: work since start lost")


def _served_text(out: TargetOutcome, notes: Sequence[NodeNote]) -> str:
    shares = []
    for p in out.placements:
        gpus = ",".join(map(str, p.gpus))
        if p.mode == "free":
            shares.append(f"{p.node} GPUs {gpus} (free now)")
        elif p.mode == "drain":
            assert p.free_at is not None
            shares.append(
                f"{p.node} GPUs {gpus} after draining {p.node}: "
                f"{', '.join(p.blockers)} reach their time limit by "
                f"{p.free_at:%H:%M}"
            )
        else:
            shares.append(f"{p.node} GPUs {gpus} by requeueing {', '.join(p.victims)}")
    text = (
        f"{out.job_id} ({out.request}): gets "
        + "; ".join(shares)
        + f" (cost {out.cost_gpu_hours:.2f} GPU-h)."
    )
    others = [f"{n.node}: {n.detail}" for n in notes if n.verdict != "chosen"]
    if others:
        text += " Other nodes: " + "; ".join(others) + "."
    return text
