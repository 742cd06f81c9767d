"""Same input, same plan: plan N times, count distinct plan JSON (issue #16).

    python bench/determinism_bench.py --runs 20                  # course + 1,000/50 bench
    python bench/determinism_bench.py --runs 20 --nodes 10000 --targets 500

Each run is a fresh ``make_plan`` on the same snapshot and policy in this process, with the
default 2 CP-SAT workers; the plan JSON (``model_dump_json``) is hashed.
"""

from __future__ import annotations

import argparse
import hashlib
import time
from collections import Counter
from pathlib import Path

from planner_bench import POLICY, busy_cluster
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.policy.file import default_policy, parse_policy
from slurm_defrag.snapshot_file import load_snapshot

ROOT = Path(__file__).resolve().parent.parent


def _runs(name: str, make: object, runs: int) -> None:
    digests: Counter[str] = Counter()
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        plan = make()  # type: ignore[operator]
        walls.append(time.perf_counter() - t0)
        digests[hashlib.sha256(plan.model_dump_json().encode()).hexdigest()[:16]] += 1
    print(
        f"{name}: {runs} runs, {len(digests)} distinct plan JSON {dict(digests)}; "
        f"wall {min(walls):.2f}-{max(walls):.2f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--targets", type=int, default=50)
    args = ap.parse_args()
    course = load_snapshot(ROOT / "examples" / "course.json")
    _runs("course", lambda: make_plan(course, default_policy()), args.runs)
    snap, targets = busy_cluster(args.nodes, args.targets, 1)
    policy = parse_policy(POLICY)
    _runs(f"bench {args.nodes}/{args.targets}", lambda: make_plan(snap, policy, targets), args.runs)


if __name__ == "__main__":
    main()
