"""Drawing ``slurm-defrag history --plot``: one figure, three panels, PNG or HTML.

Matplotlib with the Agg backend (no display needed). HTML embeds the figure as inline SVG
so the file is self-contained and sharp at any zoom.
"""

from __future__ import annotations

import base64
import html
import io
from datetime import datetime, timedelta
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: never try to open a window

import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from slurm_defrag.store.frag_history import History

FREE = "#9fb7cf"
UNUSABLE = "#d6452f"
STARVED = "#6a3d9a"
WORST = "#f2c14e"


def figure(h: History) -> Figure:
    """The three views of ``h`` as one figure."""
    fig, (ax_t, ax_m, ax_n) = plt.subplots(
        3, 1, figsize=(12, 13), gridspec_kw={"height_ratios": [3, 2, 3]}, layout="constrained"
    )
    what = f"partition {h.name}" if h.scope == "partition" else f"cluster {h.cluster}"
    fig.suptitle(
        f"GPU fragmentation history — {what}\n"
        f"{h.since:%Y-%m-%d %H:%M} to {h.until:%Y-%m-%d %H:%M} UTC, "
        f"{h.resolution_s // 60}-minute means",
        fontsize=14,
    )
    _time_panel(ax_t, h)
    _memory_panel(ax_m, h)
    _node_panel(ax_n, h)
    return fig


def _time_panel(ax: Axes, h: History) -> None:
    t = _times(h)
    ax.fill_between(t, [p.free for p in h.series], step="post", color=FREE, label="free GPUs")
    ax.fill_between(t, [p.unusable for p in h.series], step="post", color=UNUSABLE,
                    label="free but unusable by any pending job")  # fmt: skip
    top = max([1.0, *(p.free for p in h.series)])
    width = timedelta(seconds=max(h.resolution_s, 3600))
    for i, p in enumerate(h.worst, 1):
        # Behind the data (zorder 0), numbered at the top: the worst window first.
        ax.axvspan(date_number(p.t), date_number(p.t + width), color=WORST, alpha=0.5, lw=0,
                   zorder=0, label="worst hours (1 = worst)" if i == 1 else None)  # fmt: skip
        ax.text(date_number(p.t + width / 2), top * 1.02, str(i), ha="center", va="bottom",
                fontsize=9, fontweight="bold", color="#8a6d00")  # fmt: skip
    ax.set_ylabel("GPUs")
    ax.set_ylim(0, top * 1.35)  # headroom for the legend and the window numbers
    ax.set_title("Time view: free GPUs, and those no pending job could use", loc="left")
    starved = ax.twinx()
    starved.step(t, [p.falsely_starved for p in h.series], where="post", color=STARVED, lw=1.6,
                 label="falsely starved jobs")  # fmt: skip
    starved.set_ylabel("falsely starved jobs", color=STARVED)
    starved.tick_params(axis="y", colors=STARVED)
    starved.set_ylim(0, max([1.0, *(p.falsely_starved for p in h.series)]) * 1.35)
    lines, labels = ax.get_legend_handles_labels()
    lines2, labels2 = starved.get_legend_handles_labels()
    ax.legend(lines + lines2, labels + labels2, loc="upper left", ncols=4, fontsize=9,
              framealpha=0.9)  # fmt: skip
    date_axis(ax)


def _memory_panel(ax: Axes, h: History) -> None:
    t = _times(h)
    tb = 1000.0
    ax.fill_between(t, [p.free_memory_gb / tb for p in h.series], step="post", color=FREE,
                    label="free GPU memory")  # fmt: skip
    ax.fill_between(t, [p.unusable_memory_gb / tb for p in h.series], step="post",
                    color=UNUSABLE, label="free GPU memory no pending job could use")  # fmt: skip
    ax.set_ylabel("TB of GPU memory")
    ax.set_ylim(0, max([0.001, *(p.free_memory_gb / tb for p in h.series)]) * 1.3)
    ax.set_title("GPU-memory view", loc="left")
    ax.legend(loc="upper left", fontsize=9, framealpha=0.9)
    date_axis(ax)


def _node_panel(ax: Axes, h: History) -> None:
    nodes = list(reversed(h.nodes))  # barh draws bottom-up: worst on top
    if not nodes:
        ax.text(0.5, 0.5, "no node held unusable GPUs in this window", ha="center",
                transform=ax.transAxes)  # fmt: skip
        ax.set_axis_off()
        return
    y = range(len(nodes))
    bars = ax.barh(y, [n.unusable_gpu_hours for n in nodes], color=UNUSABLE)
    ax.set_yticks(list(y), [n.node for n in nodes])
    ax.set_xlabel("GPU-hours free but unusable by any pending job")
    ax.set_title("Node view: most fragmented nodes (label: time holding unusable GPUs)",
                 loc="left")  # fmt: skip
    ax.bar_label(bars, [f"{n.unusable_hours:.1f} h, max {n.max_unusable}" for n in nodes],
                 padding=4, fontsize=8)  # fmt: skip
    ax.margins(x=0.15)


def date_number(t: datetime) -> float:
    # Matplotlib's date number (days since its default epoch, 1970-01-01 UTC), computed
    # directly: the plotting functions' stubs accept floats, and date2num is untyped.
    return t.timestamp() / 86400.0


def _times(h: History) -> list[float]:
    return [date_number(p.t) for p in h.series]


def date_axis(ax: Axes) -> None:
    """Concise dates on the x axis, a light grid, no side margins (report_plot uses it too)."""
    loc = mdates.AutoDateLocator()  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(loc)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(loc))  # type: ignore[no-untyped-call]
    ax.grid(axis="y", alpha=0.3)
    ax.margins(x=0)


def save_plot(h: History, path: Path) -> None:
    """Write ``path`` (.png or .html)."""
    fig = figure(h)
    try:
        if path.suffix.lower() == ".png":
            fig.savefig(path, dpi=110)
            return
        svg = io.BytesIO()
        fig.savefig(svg, format="svg")
        path.write_text(_html(h, svg.getvalue()), encoding="utf-8")
    finally:
        plt.close(fig)


def _html(h: History, svg: bytes) -> str:
    title = html.escape(f"slurm-defrag history — {h.scope} {h.name}")
    # As an <img> data URI the SVG cannot clash with the page's own markup or styles.
    data = base64.b64encode(svg).decode()
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
        "<style>body{font-family:sans-serif;margin:2em}img{max-width:100%}</style></head>"
        f"<body><h1>{title}</h1><img alt='history plot' src='data:image/svg+xml;base64,{data}'>"
        "</body></html>\n"
    )
