"""A simulated month stored as the service's history, with a planted cause of fragmentation.

The data of docs/reports.md and of the causes report's test (tests/sim/test_record.py):
the simulator runs the workload below on a 20-node cluster and
:class:`slurm_defrag.sim.record.HistoryRecorder` stores it as the service would, one
snapshot per ``--every`` simulated seconds, in dry-run for the first half of the month and
in enforce after. With ``--defrag`` the service's planner (``PlannerStep``, the
``planner-large`` setting: targets of 4+ GPUs) runs every hour and its plans are recorded:
in dry-run they change nothing, in enforce its requeues happen.

Cluster: 20 NVSwitch nodes of 8 h100 (``n01``..``n20``). Workload (Poisson arrivals,
uniform run times, time limit = run time rounded up to the hour, plus one; about 88 % of
the GPUs asked for on average):

* account ``chem`` (users chem1..chem3): 1-GPU jobs of 12 to 48 h, time limit 3 days:
  **the planted cause**, small long jobs scattered over 8-GPU NVSwitch nodes;
* account ``ml`` (ml1, ml2): 8-GPU NVLink jobs of 2 to 10 h, which need a whole NVSwitch
  node;
* account ``bio`` (bio1..bio4): 2- and 4-GPU jobs of 1 to 8 h;
* account ``phys`` (phys1..phys6): 1- and 2-GPU jobs of 30 min to 3 h.

    .venv/bin/python bench/sim_month.py --db sqlite:////tmp/month.db
    .venv/bin/python bench/sim_month.py --db sqlite:////tmp/month.db --defrag
    .venv/bin/slurm-defrag report causes --db sqlite:////tmp/month.db --since 30d \\
        --until 2026-01-31T00:00Z
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import dataclass

import numpy as np

from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.defrag import DefragStep, NoDefrag
from slurm_defrag.sim.engine import Engine, EngineConfig
from slurm_defrag.sim.frag import typical_types
from slurm_defrag.sim.model import JobSpec, NodeSpec
from slurm_defrag.sim.placement.base import PolicyContext
from slurm_defrag.sim.placement.registry import build as build_policy
from slurm_defrag.sim.record import HistoryRecorder, dry_run_then_enforce
from slurm_defrag.store import migrate
from slurm_defrag.store.database import Store
from slurm_defrag.store.engine import make_engine
from slurm_defrag.store.repo import Repository

DAY = 86400.0
HOUR = 3600.0
CLUSTER = "simulated"


@dataclass(frozen=True)
class Kind:
    account: str
    users: int
    per_hour: float
    gpus: tuple[int, ...]
    hours: tuple[float, float]
    models: frozenset[str] | None
    nvlink: bool = False
    limit_h: float | None = None


KINDS = (
    Kind("chem", 3, 1.8, (1,), (12, 48), None, limit_h=72),
    Kind("ml", 2, 1.05, (8,), (2, 10), None, nvlink=True),
    Kind("bio", 4, 1.5, (2, 4), (1, 8), None),
    Kind("phys", 6, 7.0, (1, 2), (0.5, 3), None),
)


def nodes() -> list[NodeSpec]:
    return [NodeSpec(f"n{i:02d}", 128_000, 1_000_000, 8, "h100", "nvswitch-8")
            for i in range(1, 21)]  # fmt: skip


def workload(days: float, seed: int) -> list[JobSpec]:
    rng = random.Random(seed)
    jobs = []
    for kind in KINDS:
        t = 0.0
        while True:
            t += rng.expovariate(kind.per_hour / HOUR)
            if t >= days * DAY:
                break
            run = rng.uniform(*kind.hours) * HOUR
            limit = kind.limit_h * HOUR if kind.limit_h else (int(run / HOUR) + 2) * HOUR
            k = rng.choice(kind.gpus)
            jobs.append(JobSpec(
                name=f"{kind.account}-{len(jobs)}", cpu_milli=4000 * k, memory_mib=32_000 * k,
                num_gpu=k, gpu_milli=1000, gpu_models=kind.models, submit=t, duration=run,
                nvlink=kind.nvlink and k > 1, time_limit=limit,
                user=f"{kind.account}{rng.randint(1, kind.users)}", account=kind.account,
            ))  # fmt: skip
    jobs.sort(key=lambda j: j.submit)
    return jobs


def run(url: str, days: float = 30.0, seed: int = 1, every_s: float = HOUR,
        defrag: bool = False) -> dict[str, object]:  # fmt: skip
    """Simulate and store the month in the (empty or upgraded) database at ``url``."""
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    jobs = workload(days, seed)
    state = ClusterState(nodes())
    policy = build_policy("slurm", PolicyContext(state, typical_types(jobs), np.arange(state.size)))
    started = time.perf_counter()
    with Store.open(url) as store:
        recorder = HistoryRecorder(Repository(store), dry_run_then_enforce(days * DAY / 2),
                                   cluster=CLUSTER)  # fmt: skip
        step: DefragStep = NoDefrag()
        if defrag:
            from slurm_defrag.sim.planner_step import PlannerStep

            step = PlannerStep(min_gpus=4, keep_gpus=4)
        cfg = EngineConfig(lever_interval=every_s, defrag_interval=HOUR, time_limit=days * DAY)
        sim = Engine(state, jobs, policy, np.random.default_rng(seed),
                     recorder.step(step) if defrag else None, cfg, levers=recorder)  # fmt: skip
        recorder.attach(sim)
        stats = sim.run()
    return {
        "jobs": len(jobs), "snapshots": recorder.saved, "requeues": stats.requeues,
        "lost_gpu_h": round(stats.lost_gpu_h, 1), "seconds": round(time.perf_counter() - started),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--db", required=True, help="database URL (created and upgraded)")
    ap.add_argument("--days", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--every", type=float, default=HOUR, help="seconds between snapshots")
    ap.add_argument("--defrag", action="store_true", help="run the planner (recorded plans)")
    args = ap.parse_args()
    figures = run(args.db, args.days, args.seed, args.every, args.defrag)
    json.dump(figures, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
