"""Issue #14's Protocol B goals, checked per seed against Slurm's own first fit, and plotted.

    .venv/bin/python bench/sim_goals_b.py docs/img/sim/slurm_mode_b/all09.json [more.json ...]
        [--out docs/img/sim/goals_b.png]

Every run is divided by the ``first-fit`` run (no defrag) of the same seed, load, workload,
backfill model and time-limit model, found in any of the files given: large-job mean
wait ratio, all-jobs mean wait ratio, and GPU-hours lost (% of served). Per configuration
(policy + defrag + checkpoint share) it prints the ratios per seed and on how many seeds
all three goals hold (0.9x: large <= 0.4, all <= 1.1, lost <= 0.5 %; 1.2x: large <= 0.5,
all <= 1.15, lost <= 1.0 %). The plot has one panel per load and backfill model: all-jobs
ratio across, large-job ratio up, one marker per seed (size: GPU-hours lost), the goal
corner shaded.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

GOALS = {0.9: (0.4, 1.1, 0.5), 1.2: (0.5, 1.15, 1.0)}
"""load -> (large-job wait ratio, all-jobs wait ratio, lost % of served), upper bounds."""

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
                }
            )
    return out


def _world(r: Run) -> tuple[Any, ...]:
    """What must match between a run and its baseline."""
    return (r["trace"], r["load"], r["seed"], r["backfill"], r["user_limits"])


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("json", type=Path, nargs="+")
    ap.add_argument("--out", type=Path, default=None, help="PNG of the trade-off")
    args = ap.parse_args()
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
