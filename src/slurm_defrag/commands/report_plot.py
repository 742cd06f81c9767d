"""Drawing ``report impact --plot`` and ``report causes --plot``: one PNG each.

Matplotlib with the Agg backend (no display), as ``history --plot``
(:mod:`slurm_defrag.commands.history_plot`); the ``[plot]`` extra.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: never try to open a window

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from slurm_defrag.commands.history_plot import date_axis, date_number
from slurm_defrag.store.causes import Causes, Contributor
from slurm_defrag.store.impact import Impact

SPATIAL = "#d6452f"
TOPOLOGY = "#f2a541"
CONFIGURATION = "#9fb7cf"
FGD = "#333333"
STARVED = "#6a3d9a"
BEFORE = "#9fb7cf"
AFTER = "#2b7bba"
CHANGE = "#2ca02c"


def _save(fig: Figure, path: Path) -> None:
    try:
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)


# -- impact ------------------------------------------------------------------------------


def impact_figure(r: Impact) -> Figure:
    fig, (ax_u, ax_s, ax_c) = plt.subplots(
        3, 1, figsize=(12, 12), gridspec_kw={"height_ratios": [3, 2, 3]}, layout="constrained"
    )
    fig.suptitle(
        f"What slurm-defrag did — cluster {r.cluster}\n{r.since:%Y-%m-%d %H:%M} to "
        f"{r.until:%Y-%m-%d %H:%M} UTC, change at {r.change_at:%Y-%m-%d %H:%M} UTC\n"
        f"({r.change}); after: {r.after.requeues:,} requeues, "
        f"{r.after.gpu_hours_lost:,.1f} GPU-hours lost",
        fontsize=12,
    )
    t = [date_number(p.t) for p in r.series]
    causes = [
        ("spatial", SPATIAL, [p.unusable_spatial or 0.0 for p in r.series]),
        ("topology", TOPOLOGY, [p.unusable_topology or 0.0 for p in r.series]),
        ("configuration", CONFIGURATION, [p.unusable_configuration or 0.0 for p in r.series]),
    ]
    if t:
        labels = [f"unusable: {n}" for n, _, _ in causes]
        ax_u.stackplot(t, *(v for _, _, v in causes), labels=labels,
                       colors=[c for _, c, _ in causes], step="post")  # fmt: skip
        ax_u.step(t, [p.fgd for p in r.series], where="post", color=FGD, lw=1.4, label="FGD")
        starved = [p.falsely_starved_gpus or 0.0 for p in r.series]
        ax_s.fill_between(t, starved, step="post", color=STARVED, alpha=0.8,
                          label="GPUs falsely starved jobs ask for")  # fmt: skip
    for ax in (ax_u, ax_s):
        ax.axvline(date_number(r.change_at), color=CHANGE, lw=2, label="change")
        ax.legend(loc="upper left", fontsize=9, framealpha=0.9, ncols=3)
        date_axis(ax)
    ax_u.set_ylabel("GPUs")
    ax_u.set_title("Free GPUs no pending job could use, by cause, and FGD", loc="left")
    ax_s.set_ylabel("GPUs")
    ax_s.set_title("Falsely starved demand", loc="left")
    _comparison_panel(ax_c, r)
    return fig


def _comparison_panel(ax: Axes, r: Impact) -> None:
    # The figures fragmentation moves; requeues (0 before enforce) are in the title.
    keys = ("wait_all", "wait_large", "falsely_starved", "unusable", "fgd")
    rows = [c for c in r.comparisons if c.key in keys and c.before]
    if not rows:
        ax.set_axis_off()
        return
    # Each figure on its own scale: after relative to before (before = 100 %).
    y = range(len(rows))
    for i, c in enumerate(rows):
        base = c.before if c.before else 1.0
        ax.barh(i + 0.2, 100.0, height=0.38, color=BEFORE, label="before" if i == 0 else None)
        after = 100.0 * (c.after or 0.0) / base if c.before else 0.0
        err = None
        if c.low is not None and c.high is not None and c.before:
            lo = 100.0 * (c.before + c.low) / base
            hi = 100.0 * (c.before + c.high) / base
            err = [[max(0.0, after - lo)], [max(0.0, hi - after)]]
        ax.barh(i - 0.2, after, height=0.38, color=AFTER, xerr=err, capsize=3,
                label="after (95 % interval)" if i == 0 else None)  # fmt: skip
        ax.text(max(after, 100.0) + 3, i, f"{c.before:,.2f} → {c.after or 0.0:,.2f} {c.unit}",
                va="center", fontsize=8)  # fmt: skip
    ax.set_yticks(list(y), [c.label.strip() for c in rows])
    ax.invert_yaxis()
    ax.set_xlabel("after, % of before")
    ax.set_title("Before and after (each figure relative to its value before)", loc="left")
    ax.legend(loc="lower right", fontsize=9)
    ax.margins(x=0.25)


def save_impact(r: Impact, path: Path) -> None:
    _save(impact_figure(r), path)


# -- causes ------------------------------------------------------------------------------


def causes_figure(c: Causes) -> Figure:
    fig = plt.figure(figsize=(13, 15), layout="constrained")
    grid = fig.add_gridspec(4, 2, height_ratios=[2.2, 2.2, 2, 2])
    fig.suptitle(
        f"Why the GPUs strand — cluster {c.cluster}\n{c.since:%Y-%m-%d %H:%M} to "
        f"{c.until:%Y-%m-%d %H:%M} UTC: {c.stranded_gpu_hours:,.0f} stranded GPU-hours\n"
        f"{c.reading}",
        fontsize=12,
    )
    ax_t = fig.add_subplot(grid[0, :])
    t = [date_number(p.t) for p in c.hourly]
    if t:
        ax_t.stackplot(t, [p.spatial for p in c.hourly], [p.topology for p in c.hourly],
                       [p.configuration for p in c.hourly], step="post",
                       colors=[SPATIAL, TOPOLOGY, CONFIGURATION],
                       labels=["spatial", "topology", "configuration"])  # fmt: skip
    for i, w in enumerate(c.worst, 1):
        ax_t.annotate(str(i), (date_number(w.start), w.stranded_gpus), ha="center", va="bottom",
                      fontsize=9, fontweight="bold")  # fmt: skip
    ax_t.set_ylabel("stranded GPUs (hourly mean)")
    ax_t.set_title("Stranded GPUs by cause (numbers: the worst hours)", loc="left")
    ax_t.legend(loc="upper left", fontsize=9)
    date_axis(ax_t)
    _bars(fig.add_subplot(grid[1, :]), "What held the nodes: account × request × node type",
          c.headline)  # fmt: skip
    for d, cell in zip(
        c.dimensions, (grid[2, 0], grid[2, 1], grid[3, 0], grid[3, 1]), strict=False
    ):
        _bars(fig.add_subplot(cell), d.title.split(":")[0], d.rows)
    return fig


def _bars(ax: Axes, title: str, rows: list[Contributor]) -> None:
    if not rows:
        ax.set_axis_off()
        return
    y = list(range(len(rows)))
    left = [0.0] * len(rows)
    for name, color, values in (
        ("spatial", SPATIAL, [r.spatial for r in rows]),
        ("topology", TOPOLOGY, [r.topology for r in rows]),
        ("configuration", CONFIGURATION, [r.configuration for r in rows]),
    ):
        ax.barh(y, values, left=left, color=color, label=name)
        left = [a + b for a, b in zip(left, values, strict=True)]
    for i, r in enumerate(rows):
        ax.text(left[i], i, f" {r.share * 100:.0f} %", va="center", fontsize=8)
    ax.set_yticks(y, [r.name for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("stranded GPU-hours")
    ax.set_title(title, loc="left", fontsize=10)
    ax.margins(x=0.15)


def save_causes(c: Causes, path: Path) -> None:
    _save(causes_figure(c), path)
