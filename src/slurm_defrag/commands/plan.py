"""``slurm-defrag plan``: the dry-run preview of a defragmentation plan. Never changes Slurm."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from slurm_defrag.commands.common import JsonOpt, SnapshotOpt, load_or_read_snapshot
from slurm_defrag.report.console import output_console

if TYPE_CHECKING:  # pydantic models: imported when used, to keep startup fast
    from rich.table import Table

    from slurm_defrag.domain.cluster import ClusterSnapshot
    from slurm_defrag.domain.plan import Plan, SolveStats

PolicyOpt = Annotated[
    Path | None,
    typer.Option(
        "--policy",
        "-p",
        help="Policy file (TOML or YAML, version = 1). "
        "Default: built-in defaults (see examples/policy.toml).",
        readable=False,
    ),
]
TargetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--target",
        "-t",
        help="Plan for this pending job (repeatable). "
        "Default: the policy's strategies (falsely starved jobs).",
    ),
]


def plan(
    snapshot: SnapshotOpt = None,
    policy: PolicyOpt = None,
    json_out: JsonOpt = False,
    target: TargetOpt = None,
) -> None:
    """Preview the cheapest requeues/drains that start starved GPU jobs, with before/after maps.

    Examples:

      slurm-defrag plan                                   # the live cluster, default policy
      slurm-defrag plan -s examples/course.json           # a saved snapshot
      slurm-defrag plan -p examples/policy.toml -t 110    # a policy file, one target job
      slurm-defrag plan -s examples/course.json --json    # the plan as JSON
    """
    from slurm_defrag.domain.plan import apply_plan
    from slurm_defrag.planner.facade import make_plan
    from slurm_defrag.policy.file import default_policy, load_policy

    pol = load_policy(policy) if policy is not None else default_policy()
    snap = load_or_read_snapshot(snapshot)
    result = make_plan(snap, pol, targets=target or None)
    if json_out:
        sys.stdout.write(result.model_dump_json(indent=1) + "\n")
        return
    render(output_console(), snap, result, apply_plan(snap, result))


def bounds_line(s: SolveStats) -> str:
    """Served and cost, each against its own proven bound (not the combined objective's
    gap, which the count of unserved targets dominates)."""
    ub = s.served_upper_bound
    served = f"served {s.served} of at most {ub}" if ub is not None else f"served {s.served}"
    if ub:
        served += f" ({s.served / ub:.0%})"
    if s.cost_gpu_hours is None:
        return served
    cost = f"cost {s.cost_gpu_hours:.2f} GPU-h"
    lb = s.cost_lower_bound_gpu_hours
    if lb is not None:
        cost += f", proven lower bound {lb:.2f}" + (
            f" (+{s.cost_gap:.1%})" if s.cost_gap else " (optimal)"
        )
    det = "" if s.deterministic else "; stopped by the wall clock: a rerun may differ"
    return f"bounds: {served}; {cost}{det}"


def render(console: Console, before: ClusterSnapshot, plan: Plan, after: ClusterSnapshot) -> None:
    """Summary, per-target explanation, victims, actions, and the GPU map before/after."""
    from slurm_defrag.report.gpu_map import LEGEND, gpu_map
    from slurm_defrag.report.safe_text import clean, markup

    s = plan.solver
    console.print(
        f"[bold]{markup(plan.cluster)}[/bold] at "
        f"{plan.taken_at:%Y-%m-%d %H:%M:%S %Z}   plan [bold]{markup(plan.plan_id)}"
        f"[/bold] ({markup(plan.status)})   DRY RUN: nothing is changed in Slurm"
    )
    if s.status == "NOT_SOLVED":  # nothing reached the solver: say why, not its status
        lead = "nothing to plan" if plan.status == "empty" else "no plan"
        console.print(clean(f"{lead}: {plan.reason}"), markup=False, highlight=False)
        for target in plan.targets:  # e.g. left out on purpose (spreadable requests)
            console.print(clean(target.explanation), markup=False, highlight=False)
        return
    gap = f"{s.gap:.2%}" if s.gap is not None else "-"
    console.print(
        clean(
            f"solver: {s.status}, optimality {s.optimality}, gap {gap}, "
            f"{s.options} candidate placements"
            + (f" (pruned from {s.full_options})" if s.pruned else "")
            + f", {s.components} part(s), {s.runtime_s:.2f} s"
        ),
        markup=False,
    )
    console.print(clean(bounds_line(s)), markup=False)
    for line in plan.explanation.splitlines():
        console.print(clean(line), markup=False, highlight=False)
    if plan.victims:
        console.print(_victims_table(plan))
    if plan.actions:
        console.print(_actions_table(plan))
    touched = {p.node for tg in plan.targets for p in tg.placements} | {
        n for v in plan.victims for n in v.gpus
    }
    if touched:
        nodes_b = [n for n in before.nodes if n.name in touched]
        nodes_a = [n for n in after.nodes if n.name in touched]
        console.print(gpu_map(before, nodes_b, "GPU map before"))
        console.print(gpu_map(after, nodes_a, "GPU map after the plan"))
        console.print(LEGEND)


def _victims_table(plan: Plan) -> Table:
    from rich.table import Table

    from slurm_defrag.report.safe_text import cells

    t = Table(title="Victims (would be requeued)", title_justify="left")
    for col in ("job", "user", "QOS", "GPUs", "since", "lost GPU-h", "cost", "why"):
        t.add_column(col, overflow="fold")
    for v in plan.victims:
        gpus = " ".join(f"{n}:{','.join(map(str, i))}" for n, i in v.gpus.items())
        t.add_row(
            *cells(
                v.job_id,
                v.user,
                v.qos,
                gpus,
                f"{v.since_source} {v.since:%H:%M}",
                f"{v.lost_gpu_hours:.2f}",
                f"{v.cost_gpu_hours:.2f}",
                v.reason,
            )
        )
    return t


def _actions_table(plan: Plan) -> Table:
    from rich.table import Table

    from slurm_defrag.report.safe_text import cells

    t = Table(title="Actions (would run, in order)", title_justify="left")
    for col in ("#", "action", "job", "nodes", "reservation", "expected", "reason"):
        t.add_column(col, overflow="fold")
    for a in plan.actions:
        t.add_row(
            *cells(
                str(a.step),
                a.kind.value,
                a.job_id or "",
                ",".join(a.nodes),
                a.reservation or "",
                f"{a.expected_at:%H:%M}" if a.expected_at else "",
                a.reason,
            )
        )
    return t
