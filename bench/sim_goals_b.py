"""Protocol B goals (issue #14, or #41 on the tail), checked per seed against first fit.

    .venv/bin/python bench/sim_goals_b.py docs/img/sim/slurm_mode_b/all09.json [more.json ...]
        [--out docs/img/sim/goals_b.png] [--goals 14|41]

Every run is divided by the ``first-fit`` run (no defrag) of the same seed, load, workload,
backfill model and time-limit model, found in any of the files given: large-job mean
wait ratio, all-jobs mean wait ratio, and GPU-hours lost (% of served). Per configuration
(policy + defrag + checkpoint share) it prints the ratios per seed and on how many seeds
all three goals hold (0.9x: large <= 0.4, all <= 1.1, lost <= 0.5 %; 1.2x: large <= 0.5,
all <= 1.15, lost <= 1.0 %). The plot has one panel per load and backfill model: all-jobs
ratio across, large-job ratio up, one marker per seed (size: GPU-hours lost), the goal
corner shaded.

``--goals 41`` (issue #41, "goals on the tail"; needs runs made since, which carry the
tail and the classes): the baseline is first fit under the *same priority policy*; per
seed it prints the ratios of the large-job mean wait, the all-jobs mean, the 95th and 99th
percentile waits, the worst class of job (sim/wait_classes.py) and GPU allocation, and
GPU-hours lost; then on how many seeds every goal holds and, for each goal missed, the
worst seed's figure and by how much it misses (1.2x: large <= 0.5, all <= 1.0, p95 and p99
<= 1.05, every class <= 1.15, lost <= 0.5 %, allocation >= first fit's; 0.9x: large <= 0.4,
p95 and p99 <= 1.05, every class <= 1.1, lost <= 0.3 %). ``--markdown`` prints the same as
table rows for docs/benchmarks.md; ``--classes`` adds every class's ratio (mean and range
over the seeds), to see who pays.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from slurm_defrag.sim.wait_classes import class_ratios, worst_class

GOALS = {0.9: (0.4, 1.1, 0.5), 1.2: (0.5, 1.15, 1.0)}
"""load -> (large-job wait ratio, all-jobs wait ratio, lost % of served), upper bounds."""

TAIL_GOALS: dict[float, dict[str, float]] = {
    1.2: {"large": 0.5, "all": 1.0, "p95": 1.05, "p99": 1.05, "class": 1.15, "lost": 0.5},
    0.9: {"large": 0.4, "p95": 1.05, "p99": 1.05, "class": 1.1, "lost": 0.3},
}
"""Issue #41: load -> figure -> upper bound (ratios to first fit; lost in % of served)."""
TAIL_FLOORS: dict[float, dict[str, float]] = {1.2: {"util": 1.0}}
"""Issue #41: load -> figure -> lower bound (GPU allocation over first fit's)."""

Run = dict[str, Any]


def _runs(paths: list[Path]) -> list[Run]:
    out: list[Run] = []
    for p in paths:
        doc = json.loads(p.read_text())
        s = doc["settings"]
        for r in doc["runs"]:
            out.append(
                {
                    **r,
                    "trace": s.get("trace", "default"),
                    "backfill": s.get("backfill", "head"),
                    "user_limits": s.get("user_limits", False),
                    "priority": r.get("priority", s.get("priority", "none")),
                }
            )
    return out


def _world(r: Run) -> tuple[Any, ...]:
    """What must match between a run and its baseline (the priority policy too: first
    fit under the same priorities; runs from before #41 have none)."""
    return (
        r["trace"],
        r["load"],
        r["seed"],
        r["backfill"],
        r["user_limits"],
        r.get("priority", "none"),
    )


def ratios(runs: list[Run]) -> dict[tuple[Any, ...], list[tuple[int, float, float, float]]]:
    """(trace, load, backfill, policy, defrag, ckpt) -> [(seed, large, all, lost %)]."""
    base = {_world(r): r for r in runs if r["policy"] == "first-fit" and r["defrag"] == "none"}
    out: dict[tuple[Any, ...], list[tuple[int, float, float, float]]] = defaultdict(list)
    seen: set[tuple[Any, ...]] = set()
    for r in runs:
        b = base.get(_world(r))
        key = (r["trace"], r["load"], r["backfill"], r["policy"], r["defrag"], r["ckpt_share"])
        if b is None or (*key, r["seed"]) in seen:
            continue
        seen.add((*key, r["seed"]))
        large = r["large_wait_mean_s"] / b["large_wait_mean_s"] if b["large_wait_mean_s"] else 1.0
        every = r["wait_mean_s"] / b["wait_mean_s"] if b["wait_mean_s"] else 1.0
        out[key].append((r["seed"], large, every, r["lost_pct"]))
    return out


def meets(load: float, large: float, every: float, lost: float) -> bool:
    g = GOALS.get(load)
    return g is not None and large <= g[0] and every <= g[1] and lost <= g[2]


def _ratio(value: float, base: float) -> float:
    if base > 0:
        return value / base
    return 1.0 if value <= 0 else math.inf


def tail_figures(r: Run, b: Run) -> dict[str, Any]:
    """Issue #41's figures of run ``r`` against its first-fit baseline ``b``."""
    ratios_ = class_ratios(r["class_wait_s"], b["class_wait_s"], b["class_jobs"])
    name, worst = worst_class(ratios_)
    return {
        "large": _ratio(r["large_wait_mean_s"], b["large_wait_mean_s"]),
        "all": _ratio(r["wait_mean_s"], b["wait_mean_s"]),
        "p95": _ratio(r["wait_p95_s"], b["wait_p95_s"]),
        "p99": _ratio(r["wait_p99_s"], b["wait_p99_s"]),
        "class": worst,
        "class_name": name,
        "lost": r["lost_pct"],
        "util": _ratio(r["gpu_alloc_pct"], b["gpu_alloc_pct"]),
    }


def tail_table(runs: list[Run]) -> dict[tuple[Any, ...], list[tuple[int, dict[str, Any]]]]:
    """(trace, load, backfill, priority, policy, defrag, ckpt) -> [(seed, figures)]."""
    base = {_world(r): r for r in runs if r["policy"] == "first-fit" and r["defrag"] == "none"}
    out: dict[tuple[Any, ...], list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    seen: set[tuple[Any, ...]] = set()
    for r in runs:
        b = base.get(_world(r))
        if (
            b is None
            or "class_wait_s" not in r
            or (r["policy"], r["defrag"]) == ("first-fit", "none")
        ):
            continue
        key = (
            r["trace"],
            r["load"],
            r["backfill"],
            r.get("priority", "none"),
            r["policy"],
            r["defrag"],
            r["ckpt_share"],
        )
        if (*key, r["seed"]) in seen:
            continue
        seen.add((*key, r["seed"]))
        out[key].append((r["seed"], tail_figures(r, b)))
    return out


def misses(load: float, f: dict[str, Any]) -> dict[str, float]:
    """Goal -> how far the figure is past it (only the goals missed)."""
    out = {g: f[g] - bound for g, bound in TAIL_GOALS.get(load, {}).items() if f[g] > bound}
    out.update({g: f[g] - bound for g, bound in TAIL_FLOORS.get(load, {}).items() if f[g] < bound})
    return out


def _print_classes(runs: list[Run]) -> None:
    """Every class's mean-wait ratio to first fit, per configuration: mean [min, max]."""
    base = {_world(r): r for r in runs if r["policy"] == "first-fit" and r["defrag"] == "none"}
    by_key: dict[tuple[Any, ...], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        b = base.get(_world(r))
        if (
            b is None
            or "class_wait_s" not in r
            or (r["policy"], r["defrag"])
            == (
                "first-fit",
                "none",
            )
        ):
            continue
        key = (r["trace"], r["load"], r.get("priority", "none"), r["policy"], r["defrag"])
        for name, v in class_ratios(r["class_wait_s"], b["class_wait_s"], b["class_jobs"]).items():
            by_key[key][name].append(v)
    for key, classes in sorted(by_key.items(), key=lambda kv: str(kv[0])):
        print(f"{' '.join(str(k) for k in key)}: class ratios, mean [min, max] over seeds")
        for name, vs in sorted(classes.items()):
            print(
                f"    {name:12} {sum(vs) / len(vs):6.2f} [{min(vs):.2f}, {max(vs):.2f}] n={len(vs)}"
            )


def _print_tail(runs: list[Run], markdown: bool) -> None:
    for key, rows in sorted(tail_table(runs).items(), key=lambda kv: str(kv[0])):
        trace, load, backfill, priority, policy, defrag, _ = key
        rows.sort(key=lambda row: row[0])
        ok = sum(not misses(load, f) for _, f in rows)
        missed: dict[str, tuple[float, int]] = {}
        for seed, f in rows:
            for g, by in misses(load, f).items():
                if g not in missed or abs(by) > abs(missed[g][0]):
                    missed[g] = (by, seed)
        worst = "; ".join(
            f"{g} {by:+.2f}{' pts' if g == 'lost' else ''} (seed {seed})"
            for g, (by, seed) in sorted(missed.items())
        )
        cells = [
            f"{f['large']:.2f} / {f['all']:.2f} / {f['p95']:.2f} / {f['p99']:.2f} / "
            f"{f['class']:.2f} ({f['class_name']}) / {f['lost']:.2f} / {f['util']:.3f}"
            for _, f in rows
        ]
        verdict = f"{ok} of {len(rows)}" if load in TAIL_GOALS else "no goal"
        name = f"{trace} {load}x {policy}+{defrag} (priority {priority}, bf={backfill})"
        if markdown:
            print(f"| {name} | " + " | ".join(cells) + f" | {verdict} | {worst or '—'} |")
        else:
            print(f"{name}: goals on {verdict} seeds; missed: {worst or 'none'}")
            for (seed, _), cell in zip(rows, cells, strict=True):
                print(f"    seed {seed}: large/all/p95/p99/worst class/lost %/util {cell}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("json", type=Path, nargs="+")
    ap.add_argument("--out", type=Path, default=None, help="PNG of the trade-off")
    ap.add_argument("--goals", choices=("14", "41"), default="14", help="which issue's goals")
    ap.add_argument("--markdown", action="store_true", help="--goals 41: table rows")
    ap.add_argument("--classes", action="store_true", help="--goals 41: every class's ratio")
    args = ap.parse_args()
    if args.goals == "41":
        _print_tail(_runs(args.json), args.markdown)
        if args.classes:
            _print_classes(_runs(args.json))
        return
    table = ratios(_runs(args.json))
    for key, rows in sorted(table.items(), key=lambda kv: str(kv[0])):
        trace, load, backfill, policy, defrag, ckpt = key
        if (policy, defrag) == ("first-fit", "none"):
            continue  # the baseline itself
        rows.sort()
        ok = sum(meets(load, *row[1:]) for row in rows)
        verdict = f"goals on {ok}/{len(rows)} seeds" if load in GOALS else "no goal at this load"
        cells = " | ".join(f"{s}: {a:.2f}/{b:.2f}/{c:.2f}" for s, a, b, c in rows)
        print(
            f"{trace} {load}x bf={backfill} {policy}+{defrag} ckpt {ckpt:g}: "
            f"{verdict}  (seed: large/all/lost%) {cells}"
        )
    if args.out is not None:
        _plot(table, args.out)


def _plot(table: dict[tuple[Any, ...], list[tuple[int, float, float, float]]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({(k[0], k[1], k[2]) for k in table})
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 5.5), dpi=100)
    axes = [axes] if len(panels) == 1 else list(axes)
    for ax, (trace, load, backfill) in zip(axes, panels, strict=True):
        g = GOALS.get(load)
        if g is not None:
            ax.fill_between([0, g[1]], 0, g[0], color="tab:green", alpha=0.12, label="goal")
        for key, rows in sorted(table.items(), key=lambda kv: str(kv[0])):
            if (key[0], key[1], key[2]) != (trace, load, backfill):
                continue
            if key[3] == "first-fit" and key[4] == "none":
                continue
            xs = [r[2] for r in rows]
            ys = [r[1] for r in rows]
            sizes = [20 + 60 * r[3] for r in rows]
            label = f"{key[3]} + {key[4]}, ckpt {key[5]:.0%}"
            ax.scatter(xs, ys, s=sizes, alpha=0.75, label=label)
        ax.axhline(1, color="grey", lw=0.8)
        ax.axvline(1, color="grey", lw=0.8)
        ax.set_xlabel("all-jobs mean wait / first-fit's")
        ax.set_ylabel("large-job mean wait / first-fit's")
        ax.set_title(f"openb {trace}, {load}x load, backfill {backfill} (size: GPU-h lost)")
        ax.grid(linestyle="-.", alpha=0.5)
        ax.legend(fontsize=7)
    fig.savefig(out, bbox_inches="tight")
    print(out)


if __name__ == "__main__":
    main()
