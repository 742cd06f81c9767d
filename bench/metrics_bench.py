"""Benchmark: all fragmentation metrics on a generated cluster (default 10,000 nodes).

    python bench/metrics_bench.py --nodes 10000 --pending 50 --repeat 3

Prints the wall and CPU time of ``metrics.compute`` (nodes, partitions, models, cluster, false
starvation) and the peak memory it allocated (tracemalloc, Python heap only), in a fresh
process so memo caches start cold on the first repetition.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.metrics.compute import compute
from slurm_defrag.synth import random_cluster


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--pending", type=int, default=50)
    ap.add_argument("--fill", type=float, default=0.92)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    t0 = time.perf_counter()
    snap = random_cluster(args.nodes, seed=args.seed, fill=args.fill, pending=args.pending)
    gen = time.perf_counter() - t0
    running = sum(1 for _ in snap.running_gpu_jobs())
    print(
        f"snapshot: {len(snap.nodes)} nodes, {sum(n.gpu_count for n in snap.nodes)} GPUs, "
        f"{running} running jobs, {args.pending} pending (generated in {gen:.2f} s)"
    )

    def fresh() -> ClusterSnapshot:
        # A new snapshot object per run: per-snapshot caches (GPU owners, free masks) are
        # cold; topology memo tables stay warm after the first run, as in a running service.
        return ClusterSnapshot.model_construct(
            **{k: getattr(snap, k) for k in ClusterSnapshot.model_fields}
        )

    times, cpus = [], []
    for _ in range(args.repeat):
        s = fresh()
        t0, c0 = time.perf_counter(), time.process_time()
        report = compute(s)
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    tracemalloc.start()
    compute(fresh())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    c = report.cluster_metrics.counts
    print(
        f"free {c.free} GPUs, unusable {c.unusable.total}, FGD {c.fgd:.1f}, "
        f"falsely starved {len(report.falsely_starved)} of {len(report.pending)} pending"
    )
    print(
        f"compute: {', '.join(f'{t:.3f}' for t in times)} s (first run has cold topology "
        f"memo tables); peak traced memory of one run {peak / 2**20:.0f} MiB"
    )
    # CPU time: what a loaded machine leaves comparable (the pass is single-threaded).
    print(f"compute CPU: {', '.join(f'{t:.3f}' for t in cpus)} s, min {min(cpus):.3f} s")


if __name__ == "__main__":
    main()
