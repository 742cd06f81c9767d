"""``slurm-defrag history``: fragmentation over time, from the database.

Three views of one window: the most fragmented nodes (and how long each held free GPUs no
pending job could use), fragmentation and false starvation over time with the worst
hours, and free GPU memory no pending job could use. ``--plot`` draws them.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from slurm_defrag.commands.common import JsonOpt
from slurm_defrag.commands.db import DbOpt
from slurm_defrag.errors import InputError
from slurm_defrag.report.console import output_console
from slurm_defrag.timespec import parse_duration

if TYPE_CHECKING:
    from slurm_defrag.store.frag_history import History

_SPARK = "▁▂▃▄▅▆▇█"


def history(
    since: Annotated[
        str, typer.Option("--since", help="Window ending now: 30m, 12h, 7d, 2w.")
    ] = "7d",
    partition: Annotated[
        str | None, typer.Option("--partition", "-p", help="Only this partition.")
    ] = None,
    json_out: JsonOpt = False,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot", help="Also draw the views to FILE.png or FILE.html.", readable=False
        ),
    ] = None,
    db: DbOpt = None,
    cluster: Annotated[
        str | None, typer.Option("--cluster", help="Cluster (default: the last one saved).")
    ] = None,
    top: Annotated[int, typer.Option("--top", min=1, help="Nodes in the node view.")] = 15,
) -> None:
    """Fragmentation history: worst nodes, worst hours, wasted GPU memory."""
    from slurm_defrag.store.database import Store
    from slurm_defrag.store.engine import translate_errors
    from slurm_defrag.store.frag_history import load_history

    window = parse_duration(since)
    if plot is not None and plot.suffix.lower() not in (".png", ".html"):
        raise InputError(f"--plot: {plot} must end in .png or .html")
    if plot is not None:
        from slurm_defrag.extras import require_extra

        require_extra("matplotlib", "plot", "history --plot")
    with Store.open(db) as store, translate_errors(store.url):
        h = load_history(store, window, partition=partition, cluster=cluster, top_nodes=top)
    if plot is not None:
        from slurm_defrag.commands.history_plot import save_plot

        save_plot(h, plot)
    if json_out:
        sys.stdout.write(json.dumps(asdict(h), default=_json_default, indent=1) + "\n")
        return
    render(output_console(), h)
    if plot is not None:
        Console(stderr=True).print(f"plot written to {plot}", markup=False)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot encode {type(value).__name__}")


def _spark(values: list[float]) -> str:
    top = max(values, default=0.0)
    if top <= 0:
        return _SPARK[0] * len(values)
    return "".join(
        _SPARK[min(len(_SPARK) - 1, int(v / top * (len(_SPARK) - 1) + 0.5))] for v in values
    )


def render(console: Console, h: History) -> None:
    from slurm_defrag.report.safe_text import cells, markup

    what = markup(f"partition {h.name}" if h.scope == "partition" else f"cluster {h.cluster}")
    console.print(
        f"[bold]{what}[/]  {h.since:%Y-%m-%d %H:%M} → {h.until:%Y-%m-%d %H:%M} UTC  "
        f"({h.snapshots} snapshots, {h.resolution_s // 60} min buckets)"
    )
    if not h.series:
        console.print("no data in this window")
        return
    # As many recent buckets as fit on one terminal line after the labels; --plot shows all.
    pts = h.series[-max(10, console.width - 40) :]
    console.print(f"\n[bold]Time view[/] (last {len(pts)} buckets)")
    console.print(
        f"  unusable GPUs    {_spark([p.unusable for p in pts])}  "
        f"now {pts[-1].unusable:.0f}, peak {max(p.unusable for p in h.series):.0f}"
    )
    console.print(f"  falsely starved  {_spark([p.falsely_starved for p in pts])}  "
                  f"now {pts[-1].falsely_starved:.0f}, "
                  f"peak {max(p.max_falsely_starved for p in h.series)}")  # fmt: skip
    console.print(f"  unusable mem GB  {_spark([p.unusable_memory_gb for p in pts])}  "
                  f"now {pts[-1].unusable_memory_gb:,.0f}")  # fmt: skip

    worst = Table(title="Worst windows", title_justify="left", box=None)
    for col in ("from (UTC)", "unusable GPUs", "of free", "falsely starved (max)", "unusable GB"):
        worst.add_column(col, justify="left" if col.startswith("from") else "right")
    for p in h.worst:
        worst.add_row(f"{p.t:%Y-%m-%d %H:%M}", f"{p.unusable:.1f}", f"{p.free:.0f}",
                      f"{p.falsely_starved:.1f} ({p.max_falsely_starved})",
                      f"{p.unusable_memory_gb:,.0f}")  # fmt: skip
    console.print()
    console.print(worst)

    nodes = Table(title="Most fragmented nodes", title_justify="left", box=None)
    for col in ("node", "partitions", "unusable GPU·h", "held unusable", "max", "mean free",
                "unusable GB·h"):  # fmt: skip
        nodes.add_column(col, justify="left" if col in ("node", "partitions") else "right")
    for n in h.nodes:
        nodes.add_row(*cells(n.node, ",".join(n.partitions)), f"{n.unusable_gpu_hours:.1f}",
                      f"{n.unusable_hours:.1f} h", str(n.max_unusable), f"{n.mean_free:.1f}",
                      f"{n.unusable_memory_gb_hours:,.0f}")  # fmt: skip
    console.print()
    console.print(nodes)

    mean_mem = sum(p.unusable_memory_gb * p.samples for p in h.series) / sum(
        p.samples for p in h.series
    )
    mean_free = sum(p.free_memory_gb * p.samples for p in h.series) / sum(
        p.samples for p in h.series
    )
    console.print(
        f"\n[bold]GPU memory view[/]: on average {mean_mem:,.0f} GB of {mean_free:,.0f} GB "
        "free GPU memory could not be used by any pending job"
    )
