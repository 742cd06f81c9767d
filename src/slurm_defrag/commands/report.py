"""``slurm-defrag report``: what the service did for the cluster, and why it fragments.

Both read the stored history only (docs/reports.md): ``impact`` compares before and after
a change (the switch from dry-run to enforce, or a time), ``causes`` charges the stranded
GPU-hours to what held the nodes. ``--plot`` draws them (the optional ``[plot]`` extra).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from slurm_defrag.commands.common import JsonOpt
from slurm_defrag.commands.db import DbOpt
from slurm_defrag.errors import InputError
from slurm_defrag.report.console import output_console
from slurm_defrag.timespec import parse_duration

app = typer.Typer(
    name="report",
    help="Reports from the stored history: what the service did (impact), why the cluster "
    "fragments (causes).",
    no_args_is_help=True,
)

SinceImpact = Annotated[
    str, typer.Option("--since", help="Window ending at --until: 30m, 12h, 7d, 2w.")
]
UntilOpt = Annotated[
    str | None,
    typer.Option(
        "--until", help="End of the window: a time like 2026-12-01T14:00Z (default: now)."
    ),
]
# readable=False: the command opens its files and says what is wrong in one line (exit 3)
PlotOpt = Annotated[
    Path | None,
    typer.Option("--plot", help="Also draw the report to FILE.png.", readable=False),
]
ClusterOpt = Annotated[
    str | None, typer.Option("--cluster", help="Cluster (default: the last one saved).")
]


def _until(text: str | None) -> float:
    if text is None:
        return time.time()
    from slurm_defrag.store.impact import ChangePoint

    try:
        at = ChangePoint.parse(text).at
    except InputError:
        at = None
    if at is None:  # "mode" or not a time
        raise InputError(f"--until: {text[:40]!r} is not a time like 2026-12-01T14:00Z")
    return at


def _check_plot(plot: Path | None, what: str) -> None:
    if plot is None:
        return
    if plot.suffix.lower() != ".png":
        raise InputError(f"--plot: {plot} must end in .png")
    from slurm_defrag.extras import require_extra

    require_extra("matplotlib", "plot", what)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot encode {type(value).__name__}")


def _emit(data: Any) -> None:
    sys.stdout.write(json.dumps(asdict(data), default=_json_default, indent=1) + "\n")


@app.command()
def impact(
    since: SinceImpact = "14d",
    change_at: Annotated[
        str,
        typer.Option(
            "--change-at",
            help="Where before ends: 'mode' (the service's recorded switch from dry-run to "
            "enforce), a time like 2026-12-01T14:00Z, or a duration before --until like 3d.",
        ),
    ] = "mode",
    until: UntilOpt = None,
    large: Annotated[
        int, typer.Option("--large", min=1, help="Jobs of at least this many GPUs are large.")
    ] = 4,
    sacct: Annotated[
        Path | None,
        typer.Option(
            "--sacct",
            help="'sacct -P' output (JobID, Submit, Start, AllocTRES; times in UTC) whose "
            "exact times refine the waits; see docs/reports.md.",
            readable=False,
        ),
    ] = None,
    resamples: Annotated[
        int, typer.Option("--resamples", min=0, max=100_000, help="Bootstrap resamples.")
    ] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap.")] = 0,
    json_out: JsonOpt = False,
    plot: PlotOpt = None,
    db: DbOpt = None,
    cluster: ClusterOpt = None,
) -> None:
    """What the service did for this cluster: waits, starvation, fragmentation, plans and
    requeues before and after a change, with bootstrap intervals."""
    from slurm_defrag.store.database import Store
    from slurm_defrag.store.engine import translate_errors
    from slurm_defrag.store.impact import ChangePoint, load_impact

    window = parse_duration(since)
    now = _until(until)
    change = ChangePoint.parse(change_at, now)
    _check_plot(plot, "report impact --plot")
    records = None
    if sacct is not None:
        from slurm_defrag.slurm.parse.sacct import read_sacct

        records = read_sacct(sacct)
    with Store.open(db) as store, translate_errors(store.url):
        r = load_impact(store, window, change, cluster=cluster, now=now, large_gpus=large,
                        sacct=records, resamples=resamples, seed=seed)  # fmt: skip
    if plot is not None:
        from slurm_defrag.commands.report_plot import save_impact

        save_impact(r, plot)
    if json_out:
        _emit(r)
        return
    from slurm_defrag.report.impact_view import render

    render(output_console(), r)
    if plot is not None:
        output_console(stderr=True).print(f"plot written to {plot}", markup=False)


@app.command()
def causes(
    since: Annotated[
        str, typer.Option("--since", help="Window ending at --until: 30m, 12h, 7d, 2w.")
    ] = "7d",
    until: UntilOpt = None,
    top: Annotated[int, typer.Option("--top", min=1, max=100, help="Rows per table.")] = 5,
    json_out: JsonOpt = False,
    plot: PlotOpt = None,
    db: DbOpt = None,
    cluster: ClusterOpt = None,
) -> None:
    """Why the cluster fragments: stranded GPU-hours charged to the jobs, node types and
    hours behind them, along lifecycles, granularity, policy and topology."""
    from slurm_defrag.store.causes import load_causes
    from slurm_defrag.store.database import Store
    from slurm_defrag.store.engine import translate_errors

    window = parse_duration(since)
    now = _until(until)
    _check_plot(plot, "report causes --plot")
    with Store.open(db) as store, translate_errors(store.url):
        c = load_causes(store, window, cluster=cluster, now=now, top=top)
    if plot is not None:
        from slurm_defrag.commands.report_plot import save_causes

        save_causes(c, plot)
    if json_out:
        _emit(c)
        return
    from slurm_defrag.report.causes_view import render

    render(output_console(), c)
    if plot is not None:
        output_console(stderr=True).print(f"plot written to {plot}", markup=False)
