"""Benchmark: the Prometheus exporter's cost per cycle and per scrape.

    python bench/exporter_bench.py --nodes 10000 --pending 200

Times ``Exporter.measured`` (the per-(partition, GPU model) gauges built once per cycle
from the metrics pass) and ``Exporter.page`` (one scrape), medians of ``--repeat`` runs,
on ``examples/mixed-64.json`` and on a generated cluster of ``--nodes`` nodes.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.metrics.compute import compute
from slurm_defrag.policy.limits import Usage, UserUsage
from slurm_defrag.service.prometheus import Exporter
from slurm_defrag.snapshot_file import load_snapshot
from slurm_defrag.synth import random_cluster

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "mixed-64.json"


class NoHistory:
    def preemptions_since(self, since: datetime) -> int:
        return 0

    def user_preemptions_since(self, user: str, since: datetime) -> int:
        return 0

    def victim_usage(self, user: str, since: datetime) -> Usage:
        return Usage()

    def beneficiary_usage(self, user: str, since: datetime) -> Usage:
        return Usage()

    def usage_by_user(self, since: datetime) -> UserUsage:
        return UserUsage()

    def active_plans(self) -> int:
        return 0


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def run(name: str, snap: ClusterSnapshot, repeat: int) -> None:
    t0 = time.perf_counter()
    report = compute(snap)
    computed = time.perf_counter() - t0
    exporter = Exporter(NoHistory())
    per_cycle = median_ms(lambda: exporter.measured(report), repeat)
    per_scrape = median_ms(lambda: exporter.page({}), repeat * 4)
    size = len(exporter.page({}).body)
    print(
        f"{name}: {len(snap.nodes)} nodes; compute {computed * 1000:.0f} ms; "
        f"measured() {per_cycle:.1f} ms per cycle; page() {per_scrape:.2f} ms per scrape, "
        f"{size} bytes"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--pending", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    run("mixed-64", load_snapshot(EXAMPLE), args.repeat)
    run(
        f"random-{args.nodes}",
        random_cluster(args.nodes, seed=args.seed, pending=args.pending),
        args.repeat,
    )


if __name__ == "__main__":
    main()
