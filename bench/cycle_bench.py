"""Benchmark: the real service ``Cycle`` on a generated cluster, dry-run, FakeSlurm.

    python bench/cycle_bench.py --nodes 1000                       # SQLite in a temp dir
    python bench/cycle_bench.py --nodes 1000 --url postgresql+psycopg://u:p@host/db

The cluster is bench/planner_bench.py's (8-GPU nodes of mixed topologies, 90% busy, pending
2/4/8-GPU jobs); the targets are what the policy's strategies propose, as in the service.
The first cycle reads, computes the metrics, stores the snapshot, plans and runs the plan
on the dry-run sandbox; the steady cycles (a minute apart, nothing changed) do the same
but find the planner's inputs unchanged and do not re-plan. The database starts from an
empty schema (``--url``: its tables are dropped and re-created). Peak memory is the
process's peak RSS (``ru_maxrss``), everything included.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

from planner_bench import busy_cluster
from slurm_defrag.actuator.killswitch import KillSwitch
from slurm_defrag.policy.file import default_policy
from slurm_defrag.service.collector import tune_for_large_heap
from slurm_defrag.service.loop import Cycle, CycleDeps, CycleRules
from slurm_defrag.slurm.fake import FakeSlurm
from slurm_defrag.store import migrate
from slurm_defrag.store.database import Store
from slurm_defrag.store.engine import make_engine
from slurm_defrag.store.lease import Lease
from slurm_defrag.store.repo import Repository


class Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


def _fresh(url: str) -> Store:
    engine = make_engine(url)
    if migrate.current(engine):
        migrate.downgrade(engine, "base")
    migrate.upgrade(engine)
    engine.dispose()
    return Store.open(url)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pending", type=int, default=50, help="pending GPU jobs generated")
    ap.add_argument("--steady", type=int, default=5, help="unchanged cycles after the first")
    ap.add_argument("--url", default=None, help="database URL (default: SQLite, temp dir)")
    args = ap.parse_args()
    tune_for_large_heap()  # as `slurm-defrag serve` does
    snap, _ = busy_cluster(args.nodes, args.pending, 1, target_prefix="9")
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite:///{Path(tmp) / 'defrag.db'}"
        store = _fresh(url)
        clock = Clock(snap.taken_at)
        fake = FakeSlurm(snap, clock=clock)
        repo = Repository(store)
        deps = CycleDeps(
            fake, fake, repo, Lease(store, "bench:1", ttl_s=3600), KillSwitch(Path(tmp) / "STOP")
        )
        cycle = Cycle(deps, CycleRules("dry-run", default_policy(), 900.0), clock=clock)
        print(
            f"cluster: {len(snap.nodes)} nodes, {sum(1 for _ in snap.running_gpu_jobs())} "
            f"running jobs, {sum(1 for _ in snap.pending_gpu_jobs())} pending; database "
            f"{url.split('://')[0]}"
        )
        for i in range(1 + args.steady):
            t0, c0 = time.perf_counter(), time.process_time()
            report = cycle.run()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            kind = "first " if i == 0 else "steady"
            print(
                f"{kind} cycle {i + 1}: {wall:.2f} s wall, {cpu:.2f} s CPU; "
                f"{report.outcome}: {report.detail[:90]}"
            )
            clock.now += timedelta(minutes=1)
        store.close()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {rss:.0f} MB")


if __name__ == "__main__":
    main()
