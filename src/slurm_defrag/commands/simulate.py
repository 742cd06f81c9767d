"""``slurm-defrag simulate``: replay a public trace against placement policies."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from slurm_defrag.commands.common import JsonOpt
from slurm_defrag.errors import InputError
from slurm_defrag.report.console import output_console

if TYPE_CHECKING:
    from collections.abc import Sequence

    from slurm_defrag import suite as suite_mod
    from slurm_defrag.sim.protocol_a import ResultA
    from slurm_defrag.sim.protocol_b import ResultB


def _refuse_bad_choices(
    protocol: str, order: str, requeue_cap: str, backfill: str, priority: str
) -> None:
    """Refuse an unknown choice before the trace loads (minutes of work)."""
    from slurm_defrag import suite
    from slurm_defrag.sim.site_priority import preset

    if protocol not in ("a", "b"):
        raise InputError(f"--protocol {protocol!r}: choose a or b")
    if order not in ("shuffle", "trace"):
        raise InputError(f"--order {order!r}: choose shuffle or trace")
    if requeue_cap not in ("step", "total"):
        raise InputError(f"--requeue-cap {requeue_cap!r}: choose step or total")
    suite.engine_config(backfill)  # an unknown model is refused before the trace loads
    preset(priority)  # so is an unknown priority policy


def _loads(loads: str) -> list[float]:
    try:
        return [float(x) for x in _csv(loads)]
    except ValueError:
        raise InputError(f"--loads {loads!r}: not a comma list of numbers") from None


def _csv(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


_SimProtocolOpt = Annotated[
    str,
    typer.Option(
        "--protocol",
        "-p",
        help="a: arrivals only to --ratio (FGD paper); b: timed, with departures.",
    ),
]
_SimTraceOpt = Annotated[
    str, typer.Option("--trace", help="openb pod-list variant (default, gpushare40, ...).")
]
_SimPoliciesOpt = Annotated[
    str | None,
    typer.Option(
        "--policies",
        help="Comma list of placement policies: random, first-fit, best-fit, dot-product, "
        "fgd, packing, slurm (default: all but slurm, none with --profile).",
    ),
]
_SimProfileOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--profile",
        help="A profile file (placement, lever, job_submit.lua's queue order, defrag step "
        "and limits; docs/simulator.md); repeat for several. Each runs as one configuration, "
        "labelled by its name.",
        readable=False,
    ),
]
_SimSeedsOpt = Annotated[int, typer.Option("--seeds", min=1, help="Number of seeds.")]
_SimFirstSeedOpt = Annotated[
    int, typer.Option("--first-seed", help="First seed (the artifact uses 42).")
]
_SimRatioOpt = Annotated[
    float, typer.Option("--ratio", min=0.1, help="A: arrived GPU demand / capacity.")
]
_SimOrderOpt = Annotated[
    str, typer.Option("--order", help="A: shuffle (the artifact) or trace order.")
]
_SimLoadsOpt = Annotated[str, typer.Option("--loads", help="B: offered loads, x GPU capacity.")]
_SimScaleOpt = Annotated[
    float, typer.Option("--scale", min=0.01, max=1.0, help="B: share of nodes kept.")
]
_SimHorizonHOpt = Annotated[
    float, typer.Option("--horizon-h", min=0.1, help="B: hours of arrivals.")
]
_SimWarmupHOpt = Annotated[
    float, typer.Option("--warmup-h", min=0.0, help="B: hours not measured.")
]
_SimMaxRuntimeHOpt = Annotated[
    float, typer.Option("--max-runtime-h", min=0.01, help="B: run time cap.")
]
_SimOverlayOpt = Annotated[str, typer.Option("--overlay", help="NVLink overlay: none or nvlink.")]
_SimNvlinkJobsOpt = Annotated[
    bool, typer.Option("--nvlink-jobs/--any-gpus", help="Multi-GPU jobs need one NVLink block.")
]
_SimDefragOpt = Annotated[
    str,
    typer.Option(
        "--defrag",
        help="Comma list of defrag steps for --policies: none, planner, planner-large, "
        "planner-gain, ... (their limits: a --profile).",
    ),
]
_SimRequeueCapOpt = Annotated[
    str,
    typer.Option("--requeue-cap", help="A: 1 % of running jobs per defrag step, or in total."),
]
_SimBackfillOpt = Annotated[
    str,
    typer.Option(
        "--backfill",
        help="B: head = EASY (only the blocked head job is planned); all = every job "
        "tested is planned, as slurmctld's sched/backfill (the cross-checked model).",
    ),
]
_SimPriorityOpt = Annotated[
    str,
    typer.Option(
        "--priority",
        help="B: none = every job equal, first come first served; site = "
        "priority/multifactor with Fair Tree over seeded users, fair-share dominant.",
    ),
]
_SimOutOpt = Annotated[
    Path | None,
    typer.Option("--out", help="Folder for results JSON and PNG plots.", readable=False),
]
_SimTracesOpt = Annotated[
    Path | None,
    typer.Option(
        "--traces",
        envvar="SLURM_DEFRAG_TRACES",
        help="Folder holding alibaba-gpu-v2023/ (the openb trace); env SLURM_DEFRAG_TRACES.",
        readable=False,
    ),
]
_SimWorkloadOpt = Annotated[
    str,
    typer.Option(
        "--workload",
        help="B: openb (the trace, Poisson arrivals), sacct:FILE, your site's own "
        "jobs as sacct -P or sacct --json recorded them, replayed on the nodes of "
        "--snapshot, or db:URL, the jobs the service's stored snapshots show (db: alone: "
        "SLURM_DEFRAG_DB_URL, else the default database) (docs/site-workload.md).",
    ),
]
_SimSnapshotOpt = Annotated[
    Path | None,
    typer.Option(
        "--snapshot",
        "-s",
        help="With --workload sacct:FILE or db:URL: the snapshot JSON whose nodes are the "
        "simulated cluster, - for standard input (default: sacct: read the live cluster; "
        "db: the newest stored snapshot).",
        readable=False,
    ),
]


def simulate(
    protocol: _SimProtocolOpt = "a",
    trace: _SimTraceOpt = "default",
    policies: _SimPoliciesOpt = None,
    profile: _SimProfileOpt = None,
    seeds: _SimSeedsOpt = 10,
    first_seed: _SimFirstSeedOpt = 42,
    ratio: _SimRatioOpt = 1.3,
    order: _SimOrderOpt = "shuffle",
    loads: _SimLoadsOpt = "0.9,1.2,1.5",
    scale: _SimScaleOpt = 0.125,
    horizon_h: _SimHorizonHOpt = 18.0,
    warmup_h: _SimWarmupHOpt = 6.0,
    max_runtime_h: _SimMaxRuntimeHOpt = 6.0,
    overlay: _SimOverlayOpt = "none",
    nvlink_jobs: _SimNvlinkJobsOpt = False,
    defrag: _SimDefragOpt = "none",
    requeue_cap: _SimRequeueCapOpt = "step",
    backfill: _SimBackfillOpt = "head",
    priority: _SimPriorityOpt = "none",
    out: _SimOutOpt = None,
    json_out: JsonOpt = False,
    traces: _SimTracesOpt = None,
    workload: _SimWorkloadOpt = "openb",
    snapshot: _SimSnapshotOpt = None,
) -> None:
    """Replay Alibaba openb against Slurm-like placement policies (see docs/benchmarks.md).

    Examples:

      slurm-defrag simulate --traces DIR                      # protocol A, 10 seeds
      slurm-defrag simulate --traces DIR --seeds 1 --policies fgd,best-fit
      slurm-defrag simulate --traces DIR -p b --loads 1.2 --defrag none,planner
      slurm-defrag simulate --traces DIR --out results/ --json > results.json
      slurm-defrag simulate --traces DIR -p b --loads 0.9 --policies first-fit \
          --profile examples/profiles/one-configuration.toml --backfill all
      slurm-defrag simulate -p b --workload sacct:sacct.txt -s snap.json --warmup-h 1 \
          --policies first-fit --profile examples/profiles/shape-weights.toml --seeds 3
      slurm-defrag simulate -p b --workload db:sqlite:///var/lib/slurm-defrag/defrag.db \
          --warmup-h 1 --policies first-fit --profile examples/profiles/shape-weights.toml
    """
    site_file = _site_file(workload, protocol, traces)
    from slurm_defrag.extras import require_extra

    require_extra("numpy", "sim", "simulate")
    if out is not None:
        require_extra("matplotlib", "plot", "simulate --out (plots)")
    from slurm_defrag import suite
    from slurm_defrag.sim import report

    _refuse_bad_choices(protocol, order, requeue_cap, backfill, priority)
    load_list = _loads(loads)
    s = suite.Suite(
        trace=trace,
        overlay=overlay,
        nvlink_jobs=nvlink_jobs,
        policies=suite.policies_arg(policies, profile or []),
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
    s = suite.configured(s, profile or [])  # unknown names, bad profiles: before the trace
    if site_file is not None:
        _simulate_site(s, site_file, snapshot, out, json_out)
        return
    title = f"openb {trace}, overlay {overlay}" + (", NVLink jobs" if nvlink_jobs else "")
    if protocol == "a":
        runs_a = suite.protocol_a(s, traces=traces)
        text = report.to_json("A", s.settings(), runs_a)
        if out is not None:
            report.plot_a(runs_a, out / "protocol_a.png", f"Protocol A: {title}")
        if not json_out:
            as_paper = (trace, overlay, order, ratio, nvlink_jobs) == PAPER_SETTING
            _print_a(runs_a, f"Protocol A — {title}, {ratio:.0%} arrived", title, as_paper)
    else:
        runs_b = suite.protocol_b(s, traces=traces)
        text = report.to_json("B", s.settings(), runs_b)
        if out is not None:
            report.plot_b(runs_b, out / "protocol_b.png", f"Protocol B: {title}")
        if not json_out:
            _print_b(runs_b, f"Protocol B — {title}, {scale:.3g} of the nodes")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"protocol_{protocol}.json").write_text(text + "\n")
    if json_out:
        sys.stdout.write(text + "\n")


def _site_file(workload: str, protocol: str, traces: Path | None) -> Path | str | None:
    """The accounting file of ``--workload sacct:FILE``, the database URL of ``db:URL``
    (a str); None for ``openb``, whose trace folder must then be there (the first thing
    said, before minutes of work)."""
    if workload == "openb":
        from slurm_defrag.traces.openb import folder

        folder(traces)
        return None
    kind, _, arg = workload.partition(":")
    if kind == "db" and not arg:
        from slurm_defrag.store.engine import resolve_url

        arg = resolve_url(None, create=False)  # as --db: SLURM_DEFRAG_DB_URL, else the default
    if kind not in ("sacct", "db") or not arg:
        raise InputError(f"--workload {workload!r}: choose openb, sacct:FILE or db:URL")
    if protocol != "b":
        raise InputError(
            f"--workload {kind}:{'FILE' if kind == 'sacct' else 'URL'}: Protocol B only "
            "(-p b): jobs arrive and end"
        )
    return Path(arg) if kind == "sacct" else arg


MAX_SHOWN = 100
"""Bad records printed one line each; the rest are counted."""


def _simulate_site(
    s: suite_mod.Suite,
    path: Path | str,
    snapshot: Path | None,
    out: Path | None,
    json_out: bool,
) -> None:
    """Protocol B on the site's own jobs (``--workload sacct:FILE`` or ``db:URL``) and
    nodes."""
    from slurm_defrag import suite
    from slurm_defrag.commands.common import load_or_read_snapshot
    from slurm_defrag.sim import report
    from slurm_defrag.traces.site import site_workload

    notes: list[str] = []
    if isinstance(path, str):
        from slurm_defrag.commands.simulate_db import read_db

        db = read_db(path, inventory=snapshot is None)
        read, head, notes, name = db.read, db.head, db.notes, db.name
        snap = db.snapshot if db.snapshot is not None else load_or_read_snapshot(snapshot)
        where = label = db.label
    else:
        from slurm_defrag.slurm.parse.sacct import read_site_jobs

        read = read_site_jobs(path)
        snap = load_or_read_snapshot(snapshot)
        where, head, name, label = f"sacct:{path}", f"{read.records} records", path.name, str(path)
    site = site_workload(read.jobs, snap)
    suite.site_settings(s, site)  # what cannot run is said before the bad rows
    for line in read.problems[:MAX_SHOWN]:
        sys.stderr.write(line + "\n")
    bad = read.skipped.get("bad records", 0)
    if bad > MAX_SHOWN:
        sys.stderr.write(f"{label}: {bad - MAX_SHOWN} more bad records not shown\n")
    skipped = {**read.skipped, **site.left_out}
    summary = (
        f"workload {label}: {head}, {len(site.jobs)} jobs replayed on "
        f"{len(site.nodes)} nodes ({sum(n.gpus for n in site.nodes)} GPUs) of {snap.cluster}, "
        f"{site.span_s / 3600:.2f} h of submits, offered load {site.offered_load:.2f}"
        + ("; left out: " + ", ".join(f"{n} {why}" for why, n in sorted(skipped.items()))
           if skipped else "")
    )  # fmt: skip
    s = replace(
        s,
        extra={
            "workload": where,
            "records": read.records,
            "jobs": len(site.jobs),
            "nodes": len(site.nodes),
            "left_out": dict(sorted(skipped.items())),
        },
    )
    runs = suite.protocol_b_site(s, site)
    text = report.to_json("B", s.settings(), runs)
    title = f"Protocol B: {name} on {snap.cluster} ({len(site.nodes)} nodes)"
    if out is not None:
        report.plot_b(runs, out / "protocol_b.png", title)
        out.mkdir(parents=True, exist_ok=True)
        (out / "protocol_b.json").write_text(text + "\n")
    if json_out:
        sys.stdout.write(text + "\n")
        return
    _print_b(runs, title.replace("Protocol B:", "Protocol B —", 1))
    for line in (summary, *notes):
        output_console().print(line, markup=False, highlight=False)


PAPER_SETTING = ("default", "none", "shuffle", 1.3, False)
"""(trace, overlay, order, ratio, NVLink jobs) of the FGD paper's Protocol A: its table
shows the paper's figures beside ours."""


def _print_a(runs: Sequence[ResultA], heading: str, title: str, as_paper: bool) -> None:
    """The Protocol A table, and the defrag table when a run defragmented."""
    from slurm_defrag.sim import report

    console = output_console()
    console.print(report.table_a(runs, heading, as_paper))
    if any(r.defrag != "none" for r in runs):
        console.print(report.table_a_defrag(runs, f"Protocol A with defrag — {title}"))


def _print_b(runs: Sequence[ResultB], title: str) -> None:
    """The Protocol B table, and the jobs refused at submit if any were."""
    from slurm_defrag.sim import report

    console = output_console()
    console.print(report.table_b(runs, title))
    if (line := report.refused_line(runs)) is not None:
        console.print(line, markup=False, highlight=False)
