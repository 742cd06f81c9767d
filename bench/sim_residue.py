"""Where the unallocated GPUs are at the end of one Protocol A run.

    .venv/bin/python bench/sim_residue.py --policy packing --seed 42

Prints free milli-GPU per GPU in 50-milli bins and the jobs that failed, by shape. Used
in docs/benchmarks.md to explain the floor of online placement on openb.
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

import repo_traces  # noqa: F401  (sets SLURM_DEFRAG_TRACES for a checkout)
from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.frag import typical_types
from slurm_defrag.sim.placement.base import PolicyContext
from slurm_defrag.sim.placement.registry import build
from slurm_defrag.sim.workload import inflate
from slurm_defrag.traces import openb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--policy", default="packing")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--ratio", type=float, default=1.3)
    args = ap.parse_args()
    trace = openb.load_pods()
    state = ClusterState(openb.load_nodes())
    rng = np.random.default_rng(args.seed)
    jobs = inflate(trace, state.total_gpu_milli, args.ratio, rng)
    rank = rng.permutation(state.size).astype(np.int64)
    policy = build(args.policy, PolicyContext(state, typical_types(trace), rank))
    failed: Counter[tuple[int, int]] = Counter()
    for job in jobs:
        where = policy.choose(state, job, state.feasible(job), rng)
        if where is None:
            failed[(job.num_gpu, job.gpu_milli)] += 1
        else:
            state.allocate(job, where)
    left = state.gpu_left[state.gpu_cap > 0]
    cap = state.total_gpu_milli / 1000
    print(f"{args.policy} seed {args.seed}: {left.sum() / 1000:.1f} of {cap:.0f} GPUs unallocated")
    print(f"  completely free GPUs: {(left == 1000).sum()}")
    partial = left[(left > 0) & (left < 1000)]
    bins = Counter((partial // 50 * 50).tolist())
    for lo in sorted(bins):
        gpus = bins[lo]
        milli = partial[(partial >= lo) & (partial < lo + 50)].sum()
        print(
            f"  {lo:4d}-{lo + 49:4d} milli free: {gpus:5d} GPUs, {milli / 1000:6.1f} GPUs "
            f"({100 * milli / 1000 / cap:.2f} % of capacity)"
        )
    top = ", ".join(f"{n}x{m}: {c}" for (n, m), c in failed.most_common(8))
    print(f"  failed jobs (GPUs x milli): {top}")


if __name__ == "__main__":
    main()
