"""Results as a rich table, JSON and PNG plots (matplotlib, Agg backend)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
from rich.markup import escape
from rich.table import Table

from slurm_defrag.sim.protocol_a import PAPER_UNALLOCATED_PCT, ResultA
from slurm_defrag.sim.protocol_b import ResultB
from slurm_defrag.sim.results import (
    FIGURES_B,
    Spread,
    group,
    summary_a,
    summary_b,
    worst_classes,
)

PENDING = "pending (planner)"


def _fmt(s: Spread, digits: int = 2) -> str:
    return f"{s.mean:.{digits}f} ± {s.std:.{digits}f} [{s.min:.{digits}f}, {s.max:.{digits}f}]"


def table_a(runs: Sequence[ResultA], title: str, show_paper: bool = True) -> Table:
    """``show_paper``: add the published figures (meaningful in the paper's setting only)."""
    t = Table(title=title)
    for col in (
        "policy",
        escape("unallocated % at 130 % (mean ± sd [min, max])"),
        "paper",
        "Δ vs paper",
        "with defrag",
        "failed jobs",
        "s/run",
    ):
        t.add_column(col, justify="left" if col == "policy" else "right")
    summary = summary_a(runs)
    defragged = {k[0]: v for k, v in summary.items() if k[1] != "none"}
    for (policy, defrag), s in summary.items():
        if defrag != "none":
            continue
        mine = [r for r in runs if r.policy == policy and r.defrag == defrag]
        paper = PAPER_UNALLOCATED_PCT.get(str(policy)) if show_paper else None
        with_defrag = _fmt(defragged[str(policy)]) if str(policy) in defragged else PENDING
        t.add_row(
            str(policy),
            _fmt(s),
            f"{paper:.2f}" if paper is not None else "—",
            f"{s.mean - paper:+.2f}" if paper is not None else "—",
            with_defrag,
            f"{np.mean([r.failed for r in mine]):.0f}",
            f"{np.mean([r.wall_s for r in mine]):.1f}",
        )
    return t


def table_a_defrag(runs: Sequence[ResultA], title: str) -> Table:
    """Protocol A runs with a defrag step: the figure and what it cost in requeues."""
    t = Table(title=title)
    for col in (
        "policy",
        "defrag",
        escape("unallocated % at 130 %"),
        "requeues",
        "% of running",
        "max / step",
        "victims dropped",
        "defrag calls",
        "s/run",
    ):
        t.add_column(col, justify="left" if col in ("policy", "defrag") else "right")
    for (policy, defrag), s in summary_a(runs).items():
        mine = [r for r in runs if r.policy == policy and r.defrag == defrag]
        t.add_row(
            str(policy),
            str(defrag),
            _fmt(s),
            f"{np.mean([r.requeues for r in mine]):.0f}",
            f"{np.mean([r.requeue_pct for r in mine]):.2f}",
            f"{max(r.max_step_requeues for r in mine)}",
            f"{np.mean([r.victims_dropped for r in mine]):.0f}",
            f"{np.mean([r.defrag_calls for r in mine]):.0f}",
            f"{np.mean([r.wall_s for r in mine]):.0f}",
        )
    return t


def table_b(runs: Sequence[ResultB], title: str) -> Table:
    t = Table(title=title)
    t.add_column("load")
    t.add_column("policy")
    for name in FIGURES_B:
        t.add_column(name, justify="right")
    t.add_column("worst class / first fit", justify="right")
    t.add_column("large jobs", justify="right")
    t.add_column("s/run", justify="right")
    worst = worst_classes(runs)
    for (load, policy, defrag), figs in summary_b(runs).items():
        mine = [r for r in runs if (r.load, r.policy, r.defrag) == (load, policy, defrag)]
        label = str(policy) if defrag == "none" else f"{policy}+{defrag}"
        t.add_row(
            f"{load}",
            label,
            *(f"{figs[n].mean:.2f} ± {figs[n].std:.2f}" for n in FIGURES_B),
            _worst_cell(worst.get((load, policy, defrag), [])),
            f"{np.mean([r.large_jobs for r in mine]):.0f}",
            f"{np.mean([r.wall_s for r in mine]):.0f}",
        )
    return t


def _worst_cell(worst: Sequence[tuple[str, float]]) -> str:
    """The highest worst-class ratio over seeds, and its class ("—" without first fit)."""
    if not worst:
        return "—"
    name, r = max(worst, key=lambda w: w[1])
    return f"{r:.2f} ({escape(name)})"


def _rounded(value: object, digits: int = 4) -> object:
    """Floats to ``digits`` decimals, recursively: the curves make JSON large otherwise."""
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {k: _rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v, digits) for v in value]
    return value


def _run_dict(run: ResultA | ResultB) -> dict[str, object]:
    out = asdict(run)
    if isinstance(run, ResultB) and not run.refused:
        del out["refused"]  # as before refusal at submit existed: most runs refuse none
    return out


def refused_line(runs: Sequence[ResultB]) -> str | None:
    """One line for the jobs refused at submit (no node could ever hold them), or None."""
    counts = sorted({r.refused for r in runs})
    if not counts or counts == [0]:
        return None
    many = f"{counts[0]}-{counts[-1]}" if len(counts) > 1 else f"{counts[0]}"
    return (
        f"refused at submit: {many} jobs a run (no node of the simulated cluster could ever "
        "hold them: more CPUs, memory or GPUs than any node has, or a GPU model none has; "
        "Slurm refuses them too); left out of every figure above"
    )


def to_json(
    protocol: str, settings: dict[str, object], runs: Sequence[ResultA] | Sequence[ResultB]
) -> str:
    out: dict[str, object] = {
        "protocol": protocol,
        "settings": settings,
        "runs": [_run_dict(r) for r in runs],
    }
    if runs and isinstance(runs[0], ResultA):
        a = [r for r in runs if isinstance(r, ResultA)]
        out["summary"] = [
            {
                "policy": k[0],
                "defrag": k[1],
                "unallocated_pct": asdict(v),
                "paper": PAPER_UNALLOCATED_PCT.get(str(k[0])),
            }
            for k, v in summary_a(a).items()
        ]
    else:
        b = [r for r in runs if isinstance(r, ResultB)]
        worst = worst_classes(b)
        out["summary"] = [
            {
                "load": k[0],
                "policy": k[1],
                "defrag": k[2],
                **{n: asdict(s) for n, s in v.items()},
                "worst_class_vs_first_fit": [
                    {"class": name, "ratio": r} for name, r in worst.get(k, [])
                ],
            }
            for k, v in summary_b(b).items()
        ]
    return json.dumps(_rounded(out), indent=1, default=str)


def plot_a(runs: Sequence[ResultA], path: Path, title: str) -> None:
    """Unallocated GPU % against arrived demand, mean over seeds, like the paper's Fig. 9a."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=110)
    for (policy, defrag), rs in group(runs, lambda r: (r.policy, r.defrag)).items():
        n = min(len(r.unallocated_pct) for r in rs)
        x = np.asarray(rs[0].arrived_pct[:n])
        y = np.mean([r.unallocated_pct[:n] for r in rs], axis=0)
        label = str(policy) if defrag == "none" else f"{policy}+{defrag}"
        ax.plot(x, y, label=label, linewidth=1.8)
    ax.plot([0, 100], [100, 0], linestyle=":", color="grey", label="ideal")
    ax.set_xlim(75, 131)
    ax.set_ylim(0, 25)
    ax.set_xlabel("arrived GPU demand (% of cluster GPU capacity)")
    ax.set_ylabel("unallocated GPUs (% of capacity)")
    ax.set_title(title)
    ax.grid(linestyle="-.", alpha=0.6)
    ax.legend(fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)


def plot_b(runs: Sequence[ResultB], path: Path, title: str) -> None:
    """Large-job mean wait and GPU allocation against offered load, one line per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = summary_b(runs)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), dpi=110)
    for (policy, defrag), _ in group(runs, lambda r: (r.policy, r.defrag)).items():
        keys = sorted(k for k in summary if k[1:] == (policy, defrag))
        loads = [float(str(k[0])) for k in keys]
        label = str(policy) if defrag == "none" else f"{policy}+{defrag}"
        left.errorbar(
            loads,
            [summary[k]["large_wait_h"].mean for k in keys],
            yerr=[summary[k]["large_wait_h"].std for k in keys],
            label=label,
            marker="o",
            capsize=3,
        )
        right.plot(loads, [summary[k]["gpu_alloc_pct"].mean for k in keys], label=label, marker="o")
    left.set_xlabel("offered load (x GPU capacity)")
    left.set_ylabel("mean wait of jobs with >= 4 GPUs (h)")
    right.set_xlabel("offered load (x GPU capacity)")
    right.set_ylabel("GPU allocation (% of capacity, time average)")
    for ax in (left, right):
        ax.grid(linestyle="-.", alpha=0.6)
    left.legend(fontsize=8)
    fig.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
