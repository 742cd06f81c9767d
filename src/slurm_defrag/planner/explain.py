"""Plain-English reasons: why a node is or is not used, why a target is not served.

Node verdicts that do not depend on running jobs come from the metrics
(:func:`slurm_defrag.metrics.fit.explain`), so ``frag`` and ``plan`` never disagree on
what a node can host.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.domain.job_limits import job_limits
from slurm_defrag.domain.plan import NodeNote
from slurm_defrag.domain.topology import popcount
from slurm_defrag.domain.units import MILLI
from slurm_defrag.metrics.fit import explain
from slurm_defrag.planner.build import worth_ceilings
from slurm_defrag.planner.candidates import Candidates, RawOption, TargetSpec
from slurm_defrag.planner.geometry import share_size
from slurm_defrag.planner.nodes import JobTable
from slurm_defrag.policy.cost import to_milli
from slurm_defrag.policy.file import Policy
from slurm_defrag.solver.problem import OptionKind, ServedCap

MAX_NOTES = 12


def request_text(spec: TargetSpec) -> str:
    item = spec.item
    shape = f"{item.nodes}x{item.gpus_per_node}"
    return (
        shape
        + (" whole-node" if item.whole_node else "")
        + (" nvlink" if item.nvlink else "")
        + (f" {item.gpu_model}" if item.gpu_model else "")
    )


def hours_text(gpus: int, hours: float) -> str:
    """``hours`` with just enough decimals that ``gpus`` x it, shown to 2 decimals, is the
    product shown (``2 GPUs x 0.04 h = 0.08``, never ``2 GPUs x 0.0 h = 0.08``)."""
    product = f"{gpus * hours:.2f}"
    for digits in range(1, 5):
        shown = f"{hours:.{digits}f}"
        if f"{gpus * float(shown):.2f}" == product:
            return shown
    return f"{hours:.4f}"


def _way(o: RawOption, table: JobTable, snapshot: ClusterSnapshot) -> str:
    if o.kind is OptionKind.DRAIN:
        return (
            f"drain until {', '.join(o.blockers)} reach their time limit in "
            f"{o.wait_s / 3600:.1f} h ({o.cost / MILLI:.2f} GPU-h idle)"
        )
    if not o.victims:
        return "free now"
    parts = []
    for j in o.victims:
        job = snapshot.job_by_id[table.ids[j]]
        c = table.costs[j]
        hours = c.lost_gpu_hours / job.gpu_count if job.gpu_count else 0.0
        parts.append(
            f"{job.id} ({job.gpu_count} GPUs x {hours_text(job.gpu_count, hours)} h = "
            f"{c.lost_gpu_hours:.2f} GPU-h lost)"
        )
    return "requeue " + ", ".join(parts) + f", cost {o.cost / MILLI:.2f}"


def node_notes(
    snapshot: ClusterSnapshot,
    spec: TargetSpec,
    cands: Candidates,
    table: JobTable,
    t: int,
    chosen: set[str],
    weight: int,
) -> tuple[NodeNote, ...]:
    """Chosen nodes first, then the cheapest other possibilities, then impossible nodes.

    Exact single-share costs are computed for the chosen nodes and the ``MAX_NOTES``
    eligible nodes with the lowest cost bounds: enough to rank what is shown.
    """
    info = cands.info[t]
    chosen_idx = {cands.builder.node_index[name] for name in chosen}
    chosen_models = {snapshot.node_by_name[n].gpu_model for n in chosen}
    possible = [
        _eligible_note(snapshot, spec, cands, table, n, chosen, chosen_idx, chosen_models, weight)
        for n in _shown_nodes(cands, t, spec, chosen_idx)
    ]
    possible.sort(key=lambda p: (p[0], p[1].node))
    notes = [n for _, n in possible]
    # Only as many "can never host it" notes as the cap keeps: text for every ineligible
    # node of a 10,000-node cluster was a third of the planner's CPU, all thrown away.
    room = MAX_NOTES - len(notes)
    for n, v in info.ineligible[: max(0, room)]:
        node = snapshot.nodes[n]
        topo = snapshot.topology_of(node)
        notes.append(
            NodeNote(
                node=node.name,
                verdict=v.value,
                detail=explain(node, topo, snapshot.free_masks[node.name], spec.item, v),
            )
        )
    if len(notes) > MAX_NOTES:
        keep = [x for x in notes if x.verdict == "chosen"]
        rest = [x for x in notes if x.verdict != "chosen"]
        notes = keep + rest[: max(0, MAX_NOTES - len(keep))]
    return tuple(notes)


def _shown_nodes(cands: Candidates, t: int, spec: TargetSpec, chosen_idx: set[int]) -> list[int]:
    """The chosen nodes, then the ``MAX_NOTES`` eligible others with the lowest bounds."""
    info = cands.info[t]
    b = cands.builder
    if info.ranked is not None:  # pruned: the class ranking has the cheapest nodes
        others = [n for _, n in info.ranked if n not in chosen_idx]
    else:
        others = [
            n
            for _, n in sorted(
                (b.lower_bound(n, spec.geometry), n) for n in info.eligible if n not in chosen_idx
            )
        ]
    return sorted(chosen_idx) + others[:MAX_NOTES]


def _eligible_note(
    snapshot: ClusterSnapshot,
    spec: TargetSpec,
    cands: Candidates,
    table: JobTable,
    n: int,
    chosen: set[str],
    chosen_idx: set[int],
    chosen_models: set[str | None],
    weight: int,
) -> tuple[int, NodeNote]:
    """(rank, note) for eligible node ``n``: chosen first, then by cost, then the nodes
    that cannot free a block."""
    node = snapshot.nodes[n]
    verdict, detail, cost, rank = _eligible_verdict(
        snapshot, spec, cands, table, n, chosen, chosen_idx, weight
    )
    if (
        spec.item.gpu_model is None
        and chosen_models
        and node.gpu_model not in chosen_models
        and node.name not in chosen
    ):
        detail = f"{node.gpu_model}, eligible since the job asks for no GPU model; " + detail
    return rank, NodeNote(node=node.name, verdict=verdict, detail=detail, cost_gpu_hours=cost)


def _eligible_verdict(
    snapshot: ClusterSnapshot,
    spec: TargetSpec,
    cands: Candidates,
    table: JobTable,
    n: int,
    chosen: set[str],
    chosen_idx: set[int],
    weight: int,
) -> tuple[str, str, float | None, int]:
    """(verdict, detail, cost in GPU-hours, rank) of eligible node ``n``."""
    g = spec.geometry
    opts = [o for o in cands.builder.single(n, g) if o is not None]
    swaps = [] if opts else _swaps_on(cands, n, spec)
    if not opts and n in chosen_idx:  # hosted beside other shares of the plan only
        detail = "beside other shares of the plan"
        if swaps:
            detail += "; alone it would requeue a job as large as its share: " + (
                _jobs_text(snapshot, cands, table, swaps)
            )
        return "chosen", detail, None, -1
    if swaps:
        return (
            "swap",
            f"every {g} block requeues a job as large as the share, which frees "
            "nothing (it only moves who waits): " + _jobs_text(snapshot, cands, table, swaps),
            None,
            1 << 62,
        )
    if not opts:
        return "protected", _blocked_text(snapshot, cands, table, n, spec), None, 1 << 62
    best = min(opts, key=lambda o: o.composite(weight))
    verdict = "chosen" if snapshot.nodes[n].name in chosen else "possible"
    detail = ("cheapest alone: " if verdict == "possible" else "") + _way(best, table, snapshot)
    rank = -1 if verdict == "chosen" else best.composite(weight)
    return verdict, detail, best.cost / MILLI, rank


MAX_SWAPS = 6
"""Most jobs a swap explanation names."""


def _swaps_on(cands: Candidates, n: int, spec: TargetSpec) -> list[tuple[int, int]]:
    """(node, job) for the jobs as large as one share of ``spec`` on ``n`` when they alone
    keep its GPUs from being freed there (the swap rule); [] otherwise."""
    b, g = cands.builder, spec.geometry
    if b.gpus_way(n, g) or not b.gpus_way(n, g, swaps=True):
        return []
    st = b.state(n)
    return [(n, j) for j in st.large_jobs(share_size(st.topo, g))]


def _jobs_text(
    snapshot: ClusterSnapshot, cands: Candidates, table: JobTable, jobs: list[tuple[int, int]]
) -> str:
    """``job 46 (8 GPUs on gpu01), ...``, at most :data:`MAX_SWAPS` of them."""
    parts = []
    for n, j in jobs[:MAX_SWAPS]:
        st = cands.builder.state(n)
        parts.append(f"job {table.ids[j]} ({popcount(st.job_mask[j])} GPUs on {st.node.name})")
    more = len(jobs) - MAX_SWAPS
    return ", ".join(parts) + (f" and {more} more" if more > 0 else "")


def _blocked_text(
    snapshot: ClusterSnapshot, cands: Candidates, table: JobTable, n: int, spec: TargetSpec
) -> str:
    st = cands.states.get(n)
    if st is None:
        return "not examined"
    holders = sorted(
        {b for i, b in enumerate(st.blocker_ids) if b is not None and st.immovable >> i & 1}
    )
    why = [f"{h} ({'; '.join(table.protected.get(h, ('not visible',)))})" for h in holders]
    return (
        (f"every {spec.geometry} block holds a job that may not be requeued: " + ", ".join(why))
        if why
        else f"no {spec.geometry} block"
    )


def unserved_reason(
    snapshot: ClusterSnapshot,
    policy: Policy,
    spec: TargetSpec,
    cands: Candidates,
    table: JobTable,
    t: int,
    notes: tuple[NodeNote, ...],
    served_cap: ServedCap | None = None,
) -> str:
    """Why target ``t`` is not served. ``served_cap``: what requeues for its user's
    targets could still spend in this plan (the beneficiary limits), if they bind."""
    head = f"{spec.job.id} ({request_text(spec)}): not served: "
    unreadable = job_limits(spec.job, spec.nodes).unreadable
    if unreadable:
        return f"{head}its own node limits are not modelled, so no block is freed: {unreadable}"
    info = cands.info[t]
    if not info.eligible:
        return head + _no_eligible_text(cands, spec, t)
    b = cands.builder
    g = spec.geometry
    able = b.able_nodes(info.eligible, g)
    if not able:
        return head + _no_able_text(snapshot, cands, table, spec, t)
    if len(able) < spec.nodes:
        return head + (f"needs {spec.nodes} nodes, only {len(able)} can host a share")
    ranked, _ = b.rank(able, g, 1)
    if not ranked:
        return head + "no placement fits its CPUs and memory"
    best = min(
        (o for o in b.single(ranked[0][1], g) if o is not None),
        key=lambda o: (o.cost, len(o.victims)),
    )
    node = snapshot.nodes[best.node].name
    over = None
    if best.kind is OptionKind.REQUEUE:
        over = _over_limits(snapshot, policy, spec, best, table, node, served_cap)
    why = over or _not_worth(policy, spec, best, table, node, cands, t)
    if why:
        return head + why
    return head + (
        "the GPUs or the limit budget it needs went to higher-value targets "
        f"(its cheapest placement alone: {node}: {_way(best, table, snapshot)}); "
        "limits: " + _limits_text(policy)
    )


def _no_eligible_text(cands: Candidates, spec: TargetSpec, t: int) -> str:
    counts = cands.builder.verdict_counts(cands.info[t].ineligible)
    if not counts:
        return f"no node in partition {spec.job.partition or '(any)'}"
    return "no node can ever host it: " + ", ".join(
        f"{v} ({k} nodes)" for v, k in sorted(counts.items())
    )


def _no_able_text(
    snapshot: ClusterSnapshot, cands: Candidates, table: JobTable, spec: TargetSpec, t: int
) -> str:
    """Why no eligible node can free a block: host demand, the swap rule, or protections."""
    b, g, eligible = cands.builder, spec.geometry, cands.info[t].eligible
    if any(b.gpus_way(n, g) for n in eligible):
        return "no node can give its CPUs and memory, even requeueing every job it may"
    swaps = [x for n in eligible for x in _swaps_on(cands, n, spec)]
    if swaps:
        return (
            "the only ways to free its GPUs requeue jobs as large as its share there, which "
            "frees nothing (it only moves who waits): " + _jobs_text(snapshot, cands, table, swaps)
        )
    reasons: Counter[str] = Counter()
    holders: set[str] = set()
    for n in eligible:
        st = cands.states.get(n)
        if st is None:
            continue
        for i, bid in enumerate(st.blocker_ids):
            if bid is not None and st.immovable >> i & 1 and bid not in holders:
                holders.add(bid)
                for r in table.protected.get(bid, ("held by a job not in the snapshot",)):
                    reasons[r.split(" (")[0] if r.startswith("name=") else r] += 1
    return f"all {len(holders)} candidate victims are protected: " + ", ".join(
        f"{r} ({k})" if k > 1 else r for r, k in reasons.most_common()
    )


def _over_limits(
    snapshot: ClusterSnapshot,
    policy: Policy,
    spec: TargetSpec,
    best: RawOption,
    table: JobTable,
    node: str,
    served_cap: ServedCap | None,
) -> str | None:
    """Which plan or beneficiary limit the cheapest requeue placement breaks (None: none)."""
    lim = policy.limits
    if lim.max_victims_per_plan is not None and len(best.victims) > lim.max_victims_per_plan:
        return (
            f"its cheapest placement ({node}: {_way(best, table, snapshot)}) "
            f"needs {len(best.victims)} requeues, limits.max_victims_per_plan "
            f"allows {lim.max_victims_per_plan}"
        )
    lost = sum(table.costs[j].lost_gpu_hours for j in best.victims)
    gh = lim.max_gpu_hours_lost_per_plan
    if gh is not None and lost > gh:
        return (
            f"its cheapest placement ({node}) loses {lost:.2f} GPU-hours, "
            f"limits.max_gpu_hours_lost_per_plan allows {gh:g}"
        )
    if served_cap is not None:
        return _budget_spent(spec, best, table, node, served_cap)
    return None


def _budget_spent(
    spec: TargetSpec, best: RawOption, table: JobTable, node: str, cap: ServedCap
) -> str | None:
    """Why the cheapest placement breaks the user's beneficiary budget (None: it fits)."""
    user = spec.job.user
    theirs = [j for j in best.victims if table.snapshot.job_by_id[table.ids[j]].user != user]
    lost = sum(table.costs[j].lost_gpu_hours for j in theirs)
    tail = " today (a free block or a drain, which requeue nothing, still may)"
    if cap.requeues is not None and len(theirs) > cap.requeues:
        return (
            f"its cheapest placement ({node}) requeues {len(theirs)} job(s) of other users; "
            f"limits.max_requeues_for_user_per_day leaves {user or '(no user)'} "
            f"{cap.requeues} more{tail}"
        )
    if cap.lost is not None and to_milli(lost) > cap.lost:
        return (
            f"its cheapest placement ({node}) loses {lost:.2f} GPU-hours of other users' work; "
            f"limits.max_gpu_hours_lost_for_user_per_day leaves {user or '(no user)'} "
            f"{cap.lost / MILLI:.2f} more{tail}"
        )
    return None


def _not_worth(
    policy: Policy,
    spec: TargetSpec,
    best: RawOption,
    table: JobTable,
    node: str,
    cands: Candidates,
    t: int,
) -> str | None:
    """Why no placement of target ``t`` passes ``cost.target_wait_weight`` (shown by its
    cheapest one); None if some option does (then it lost to other targets or limits)."""
    (ceiling,) = worth_ceilings([spec], table.now, policy.cost)
    if ceiling is None or ceiling.admits(best):
        return None
    if any(ceiling.admits(o) for o in cands.options if o.target == t):
        return None
    planned = spec.job.planned_start
    if planned is None:
        when = f"Slurm has no start planned for it (counted as {ceiling.wait_s / 3600:g} h)"
    else:
        due = f"in {ceiling.wait_s / 3600:.2f} h" if ceiling.wait_s else "already due"
        when = f"Slurm plans to start it at {planned.astimezone(UTC):%Y-%m-%dT%H:%M:%S}Z ({due})"
    if best.kind is OptionKind.DRAIN:
        return (
            f"not worth it: {when}, and its cheapest placement ({node}) drains for "
            f"{best.wait_s / 3600:.2f} h, no sooner"
        )
    return (
        f"not worth it: {when}; a plan may cost what that wait is worth "
        f"(cost.target_wait_weight x GPUs x hours = {ceiling.cost / MILLI * spec.nodes:.2f}"
        f" GPU-h), its cheapest placement costs more: {node}: "
        f"{_way(best, table, table.snapshot)}"
    )


def _limits_text(policy: Policy) -> str:
    lim = policy.limits
    parts = [f"{k}={v}" for k, v in lim.model_dump().items() if v is not None]
    return ", ".join(parts) or "none"
