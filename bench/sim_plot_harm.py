"""Trade-off plot of Protocol B runs: large-job wait vs all-jobs wait, GPU-hours lost as size.

    .venv/bin/python bench/sim_plot_harm.py docs/img/sim/harm_grid.json [--out PNG]

One point per configuration (defrag step x checkpointing share), the mean over seeds;
the small markers are the single seeds. Reads the JSON ``bench/sim_protocol_b.py`` writes.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("json", type=Path)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = json.loads(args.json.read_text())["runs"]
    groups: dict[tuple[str, str, float], list[dict[str, float]]] = defaultdict(list)
    for r in runs:
        groups[(r["policy"], r["defrag"], r.get("ckpt_share", 0.0))].append(r)
    fig, ax = plt.subplots(figsize=(7, 5), dpi=110)
    for (policy, defrag, ckpt), rs in sorted(groups.items()):
        xs = [r["wait_mean_s"] / 3600 for r in rs]
        ys = [r["large_wait_mean_s"] / 3600 for r in rs]
        lost = sum(r["lost_pct"] for r in rs) / len(rs)
        label = f"{policy}+{defrag}, ckpt {ckpt:.0%}: lost {lost:.2f} %"
        pts = ax.scatter([sum(xs) / len(xs)], [sum(ys) / len(ys)], s=60 + 120 * lost, label=label)
        ax.scatter(xs, ys, s=12, color=pts.get_facecolor())
    ax.set_xlabel("mean wait, all jobs (h)")
    ax.set_ylabel("mean wait, jobs with >= 4 GPUs (h)")
    ax.set_title("Protocol B trade-off (marker size: GPU-hours lost, % of served)")
    ax.grid(linestyle="-.", alpha=0.6)
    ax.legend(fontsize=7)
    out = args.out or args.json.with_suffix(".png")
    fig.savefig(out, bbox_inches="tight")
    print(out)


if __name__ == "__main__":
    main()
