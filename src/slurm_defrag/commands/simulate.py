"""``slurm-defrag simulate``: replay a public trace against placement policies."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from slurm_defrag.commands.common import JsonOpt
from slurm_defrag.errors import InputError
from slurm_defrag.packing.node_levers import LEVERS
from slurm_defrag.report.console import output_console


def _csv(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def simulate(
    protocol: Annotated[
        str,
        typer.Option(
            "--protocol",
            "-p",
            help="a: arrivals only to --ratio (FGD paper); b: timed, with departures.",
        ),
    ] = "a",
    trace: Annotated[
        str, typer.Option("--trace", help="openb pod-list variant (default, gpushare40, ...).")
    ] = "default",
    policies: Annotated[
        str,
        typer.Option(
            "--policies", help="Comma list: random, first-fit, best-fit, dot-product, fgd, packing."
        ),
    ] = "random,first-fit,best-fit,dot-product,fgd,packing",
    levers: Annotated[
        str,
        typer.Option(
            "--levers",
            help=f"Slurm mode: comma list of packing levers ({', '.join(LEVERS)}), "
            "each run as policy "
            "slurm+<lever>/<N> beside --policies; none = Slurm alone.",
        ),
    ] = "",
    lever_every: Annotated[
        str,
        typer.Option(
            "--lever-every", help="A: comma list of N, arrivals per service cycle (levers)."
        ),
    ] = "1",
    seeds: Annotated[int, typer.Option("--seeds", min=1, help="Number of seeds.")] = 10,
    first_seed: Annotated[
        int, typer.Option("--first-seed", help="First seed (the artifact uses 42).")
    ] = 42,
    ratio: Annotated[
        float, typer.Option("--ratio", min=0.1, help="A: arrived GPU demand / capacity.")
    ] = 1.3,
    order: Annotated[
        str, typer.Option("--order", help="A: shuffle (the artifact) or trace order.")
    ] = "shuffle",
    loads: Annotated[
        str, typer.Option("--loads", help="B: offered loads, x GPU capacity.")
    ] = "0.9,1.2,1.5",
    scale: Annotated[
        float, typer.Option("--scale", min=0.01, max=1.0, help="B: share of nodes kept.")
    ] = 0.125,
    horizon_h: Annotated[
        float, typer.Option("--horizon-h", min=0.1, help="B: hours of arrivals.")
    ] = 18.0,
    warmup_h: Annotated[
        float, typer.Option("--warmup-h", min=0.0, help="B: hours not measured.")
    ] = 6.0,
    max_runtime_h: Annotated[
        float, typer.Option("--max-runtime-h", min=0.01, help="B: run time cap.")
    ] = 6.0,
    overlay: Annotated[
        str, typer.Option("--overlay", help="NVLink overlay: none or nvlink.")
    ] = "none",
    nvlink_jobs: Annotated[
        bool, typer.Option("--nvlink-jobs/--any-gpus", help="Multi-GPU jobs need one NVLink block.")
    ] = False,
    defrag: Annotated[
        str,
        typer.Option("--defrag", help="Comma list of defrag steps: none, planner, planner-large."),
    ] = "none",
    requeue_cap: Annotated[
        str,
        typer.Option("--requeue-cap", help="A: 1 % of running jobs per defrag step, or in total."),
    ] = "step",
    backfill: Annotated[
        str,
        typer.Option(
            "--backfill",
            help="B: head = EASY (only the blocked head job is planned); all = every job "
            "tested is planned, as slurmctld's sched/backfill (the cross-checked model).",
        ),
    ] = "head",
    priority: Annotated[
        str,
        typer.Option(
            "--priority",
            help="B: none = every job equal, first come first served; site = "
            "priority/multifactor with Fair Tree over seeded users, fair-share dominant.",
        ),
    ] = "none",
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Folder for results JSON and PNG plots.", readable=False),
    ] = None,
    json_out: JsonOpt = False,
    traces: Annotated[
        Path | None,
        typer.Option(
            "--traces",
            envvar="SLURM_DEFRAG_TRACES",
            help="Folder holding alibaba-gpu-v2023/ (the openb trace); env SLURM_DEFRAG_TRACES.",
            readable=False,
        ),
    ] = None,
) -> None:
    """Replay Alibaba openb against Slurm-like placement policies (see docs/benchmarks.md).

    Examples:

      slurm-defrag simulate --traces DIR                      # protocol A, 10 seeds
      slurm-defrag simulate --traces DIR --seeds 1 --policies fgd,best-fit
      slurm-defrag simulate --traces DIR -p b --loads 1.2 --defrag none,planner
      slurm-defrag simulate --traces DIR --out results/ --json > results.json
    """
    from slurm_defrag.traces.openb import folder

    folder(traces)  # a missing trace is the first thing said, before minutes of work
    from slurm_defrag.extras import require_extra

    require_extra("numpy", "sim", "simulate")
    if out is not None:
        require_extra("matplotlib", "plot", "simulate --out (plots)")
    from slurm_defrag import suite
    from slurm_defrag.sim import report

    if protocol not in ("a", "b"):
        raise InputError(f"--protocol {protocol!r}: choose a or b")
    if order not in ("shuffle", "trace"):
        raise InputError(f"--order {order!r}: choose shuffle or trace")
    if requeue_cap not in ("step", "total"):
        raise InputError(f"--requeue-cap {requeue_cap!r}: choose step or total")
    suite.engine_config(backfill)  # an unknown model is refused before the trace loads
    from slurm_defrag.sim.site_priority import preset

    preset(priority)  # so is an unknown priority policy
    from slurm_defrag.sim.levers import mode_policies, parse_mode
    from slurm_defrag.sim.policies.registry import POLICIES

    chosen = _csv(policies)
    if levers:
        try:
            every = [int(x) for x in _csv(lever_every)]
            chosen += mode_policies(_csv(levers), every)
        except ValueError as e:
            raise InputError(f"--levers/--lever-every: {e}") from None

    def known(p: str) -> bool:
        try:
            return p in POLICIES or parse_mode(p) is not None
        except ValueError:
            return False

    unknown = [p for p in chosen if not known(p)]
    if unknown:
        raise InputError(
            f"--policies: unknown {', '.join(unknown)}; choose from {', '.join(POLICIES)}"
        )
    try:
        load_list = [float(x) for x in _csv(loads)]
    except ValueError:
        raise InputError(f"--loads {loads!r}: not a comma list of numbers") from None
    s = suite.Suite(
        trace=trace,
        overlay=overlay,
        nvlink_jobs=nvlink_jobs,
        policies=tuple(chosen),
        seeds=tuple(range(first_seed, first_seed + seeds)),
        defrag=tuple(_csv(defrag)),
        ratio=ratio,
        shuffle=order == "shuffle",
        requeue_cap=requeue_cap,
        loads=tuple(load_list),
        scale=scale,
        horizon_h=horizon_h,
        warmup_h=warmup_h,
        max_runtime_h=max_runtime_h,
        backfill=backfill,
        priority=priority,
    )
    console = output_console()
    title = f"openb {trace}, overlay {overlay}" + (", NVLink jobs" if nvlink_jobs else "")
    if protocol == "a":
        runs_a = suite.protocol_a(s, traces=traces)
        text = report.to_json("A", s.settings(), runs_a)
        if out is not None:
            report.plot_a(runs_a, out / "protocol_a.png", f"Protocol A: {title}")
        if not json_out:
            as_paper = (trace, overlay, order, ratio, nvlink_jobs) == (
                "default",
                "none",
                "shuffle",
                1.3,
                False,
            )
            table = report.table_a(runs_a, f"Protocol A — {title}, {ratio:.0%} arrived", as_paper)
            console.print(table)
            if any(r.defrag != "none" for r in runs_a):
                console.print(report.table_a_defrag(runs_a, f"Protocol A with defrag — {title}"))
    else:
        runs_b = suite.protocol_b(s, traces=traces)
        text = report.to_json("B", s.settings(), runs_b)
        if out is not None:
            report.plot_b(runs_b, out / "protocol_b.png", f"Protocol B: {title}")
        if not json_out:
            console.print(report.table_b(runs_b, f"Protocol B — {title}, {scale:.3g} of the nodes"))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"protocol_{protocol}.json").write_text(text + "\n")
    if json_out:
        sys.stdout.write(text + "\n")
