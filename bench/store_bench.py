"""Persistence benchmark: months of 1-minute snapshots of a 1,000-node / 8,000-GPU cluster.

The cluster evolves incrementally, as a real one does between two reads: each minute a few
jobs end (Poisson), new ones arrive and start on random free GPUs when they fit (which is
what fragments nodes), pending jobs start when space appears, and only the nodes touched
get a new ``Node`` (GresUsed indices and IDLE/MIXED/ALLOCATED state). Unchanged nodes and
jobs are the *same objects* from one snapshot to the next, like a reader that caches.

Measured: write time per snapshot (``Repository.save_snapshot``, one transaction), metrics
time (``compute``, reported apart: it is not storage), database size, and the time of
``slurm-defrag history --since <days>d`` (in process, and as the CLI in a subprocess).

    .venv/bin/python bench/store_bench.py --db "$(scripts/postgres.sh start)" --days 3
    .venv/bin/python bench/store_bench.py --db URL --days 3 --reuse --replicate 9  # a month
    .venv/bin/python bench/store_bench.py --days 1 --minutes-per-snapshot 5   # SQLite, quick

A run without ``--reuse`` wipes the database it is given (downgrade to base, upgrade).
``--replicate N`` (PostgreSQL) then copies the measured period N times, shifted back in
time, to measure size and history on a month-sized database without simulating a month.
Results and the exact commands used: ``docs/benchmarks.md``, "Persistence".

Goals: < 50 ms per write, < 1 GB for 30 days on PostgreSQL, history --since 30d < 2 s.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import text

from slurm_defrag.domain.cluster import ClusterSnapshot, GpuRequest, Job, JobState, Node
from slurm_defrag.metrics.compute import compute
from slurm_defrag.store import migrate
from slurm_defrag.store.database import Store
from slurm_defrag.store.engine import make_engine
from slurm_defrag.store.history import load_history
from slurm_defrag.store.repo import Repository
from slurm_defrag.synth import JOB_SIZES, random_cluster

ROOT = Path(__file__).resolve().parent.parent


def _poisson(rng: random.Random, lam: float) -> int:
    # Knuth's method: fine for the small rates used here.
    limit, k, p = math.exp(-lam), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


class Churn:
    """A cluster that evolves minute by minute; :meth:`step` returns the next snapshot.

    Parameters
    ----------
    ends_per_min, arrivals_per_min
        Mean job ends and arrivals per minute (the defaults keep ~70 % of GPUs busy).
    """

    def __init__(
        self,
        n_nodes: int = 1000,
        seed: int = 1,
        start: datetime | None = None,
        ends_per_min: float = 4.0,
        arrivals_per_min: float = 4.0,
    ) -> None:
        base = random_cluster(n_nodes, seed=seed, fill=0.7, pending=20)
        self.rng = random.Random(seed)
        self.cluster = base.cluster
        self.partitions = base.partitions
        self.t = start or base.taken_at
        self.ends, self.arrivals = ends_per_min, arrivals_per_min
        self.nodes = {n.name: n for n in base.nodes}
        self.order = [n.name for n in base.nodes]
        self.free = {n.name: set(range(n.gpu_count)) for n in base.nodes}
        self.usable = {n.name for n in base.nodes if n.available}
        self.running: dict[str, Job] = {}
        self.pending: dict[str, Job] = {}
        for job in base.jobs:
            if job.holds_gpus:
                self.running[job.id] = job
                for node, idx in job.gpus.items():
                    self.free[node] -= idx
            elif job.request is not None:
                self.pending[job.id] = job
        self.next_id = max(int(j.id) for j in base.jobs) + 1
        self.users = [f"user{i}" for i in range(40)]
        self._refresh(set(self.nodes))

    def step(self, minutes: float = 1.0) -> ClusterSnapshot:
        self.t += timedelta(minutes=minutes)
        touched: set[str] = set()
        for _ in range(min(len(self.running), _poisson(self.rng, self.ends * minutes))):
            job = self.running.pop(self.rng.choice(list(self.running)))
            for node, idx in job.gpus.items():
                self.free[node] |= idx
                touched.add(node)
        for job in sorted(self.pending.values(), key=lambda j: -j.priority):
            if self._start(job, touched):
                del self.pending[job.id]
        for _ in range(_poisson(self.rng, self.arrivals * minutes)):
            job = self._new_job()
            if not self._start(job, touched) and len(self.pending) < 60:
                self.pending[job.id] = job
        self._refresh(touched)
        jobs = sorted((*self.running.values(), *self.pending.values()), key=lambda j: int(j.id))
        return ClusterSnapshot(
            cluster=self.cluster, taken_at=self.t, source="simulator",
            nodes=tuple(self.nodes[n] for n in self.order), jobs=tuple(jobs),
            partitions=self.partitions,
        )  # fmt: skip

    def _new_job(self) -> Job:
        sizes, weights = zip(*JOB_SIZES, strict=True)
        k = self.rng.choices(sizes, weights)[0]
        jid = str(self.next_id)
        self.next_id += 1
        return Job(
            id=jid, name=f"job{jid}", user=self.rng.choice(self.users),
            account=f"acct{self.rng.randrange(8)}", partition="batch", qos="normal",
            priority=self.rng.randrange(100, 10000), state=JobState.PENDING, reason="Resources",
            submit_time=self.t, time_limit_s=int(self.rng.uniform(1, 48) * 3600),
            request=GpuRequest(gpus_per_node=k, nvlink=k > 1 and self.rng.random() < 0.8),
        )  # fmt: skip

    def _start(self, job: Job, touched: set[str]) -> bool:
        """Start ``job`` on random nodes with room, on random free GPUs (no packing)."""
        req = job.request
        assert req is not None
        shape = req.per_node_shape() or (1, req.gpus)
        n_nodes, k = shape
        fits = [
            n for n, f in self.free.items()
            if n in self.usable and len(f) >= k and job.partition in self.nodes[n].partitions
            and req.gpu_model in (None, self.nodes[n].gpu_model)
        ]  # fmt: skip
        if len(fits) < n_nodes:
            return False
        gpus = {}
        for node in self.rng.sample(fits, n_nodes):
            idx = frozenset(self.rng.sample(sorted(self.free[node]), k))
            self.free[node] -= idx
            gpus[node] = idx
            touched.add(node)
        self.running[job.id] = job.model_copy(
            update={"state": JobState.RUNNING, "reason": "", "start_time": self.t, "gpus": gpus,
                    "request": None}
        )  # fmt: skip
        return True

    def _refresh(self, names: set[str]) -> None:
        """New Node objects for nodes whose GPUs changed (GresUsed and base state)."""
        for name in names:
            node = self.nodes[name]
            used = frozenset(range(node.gpu_count)) - self.free[name]
            base = "IDLE" if not used else "ALLOCATED" if len(used) == node.gpu_count else "MIXED"
            flags = {f for f in node.state if f not in ("IDLE", "MIXED", "ALLOCATED")} | {base}
            if used != node.gpus_used or flags != node.state:
                data = node.model_dump()
                data.update(gpus_used=used, state=flags)
                self.nodes[name] = Node.model_validate(data)


def snapshots(args: argparse.Namespace) -> Iterator[ClusterSnapshot]:
    n = int(args.days * 1440 / args.minutes_per_snapshot)
    # End the simulated period now, so `history --since Nd` sees all of it.
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=args.days)
    sim = Churn(args.nodes, seed=args.seed, start=start)
    for _ in range(n):
        yield sim.step(args.minutes_per_snapshot)


def db_size(store: Store, url: str) -> int:
    with store.engine.connect() as conn:
        if store.dialect == "postgresql":
            return int(
                conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one()
            )
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    path = Path(url.removeprefix("sqlite:///"))
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def row_counts(store: Store) -> dict[str, int]:
    tables = ("snapshots", "node_states", "job_states", "jobs", "gpu_allocations",
              "node_metrics", "group_metrics")  # fmt: skip
    with store.engine.connect() as conn:
        return {
            t: int(conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()) for t in tables
        }


# Copies of the measured period, shifted back in time, for a month-sized database when
# simulating a whole month would take too long. Snapshot ids of copy k are offset by
# k * ID_STEP (intervals keep their shape); times by k * the measured span. Job identity rows
# are copied under new job ids so every table grows as it would. PostgreSQL only.
ID_STEP = 10_000_000
_REPLICATE = [
    """INSERT INTO snapshots (id, cluster, taken_at, tz_offset_s, t, source, schema_version,
         config_hash, node_order, job_order, nodes, jobs, saved_at)
       SELECT id + :off, cluster, taken_at - make_interval(secs => :shift), tz_offset_s,
         t - :shift, source, schema_version, config_hash, node_order, job_order, nodes, jobs,
         saved_at FROM snapshots WHERE id < :step""",
    """INSERT INTO group_metrics SELECT snapshot_id + :off, scope, name, cluster, t - :shift,
         nodes, gpus, used, free, free_unavailable, free_memory_gb, unusable,
         unusable_memory_gb, fgd, largest_free_block, pending, falsely_starved, short
       FROM group_metrics WHERE snapshot_id < :step""",
    """INSERT INTO node_states (node_id, from_snapshot, to_snapshot, state, gpus_used, body)
       SELECT node_id, from_snapshot + :off, coalesce(to_snapshot, :last) + :off, state,
         gpus_used, body FROM node_states WHERE from_snapshot < :step""",
    """INSERT INTO jobs (cluster, job_id, "user", account, first_snapshot, first_seen_at)
       SELECT cluster, job_id || '.r' || :k, "user", account, first_snapshot + :off,
         first_seen_at - make_interval(secs => :shift) FROM jobs WHERE first_snapshot < :step""",
    """INSERT INTO job_states (job_ref, from_snapshot, to_snapshot, state, body)
       SELECT job_ref, from_snapshot + :off, coalesce(to_snapshot, :last) + :off, state, body
       FROM job_states WHERE from_snapshot < :step""",
    """INSERT INTO gpu_allocations (node_id, gpu_index, job_ref, from_snapshot, to_snapshot)
       SELECT node_id, gpu_index, job_ref, from_snapshot + :off,
         coalesce(to_snapshot, :last) + :off FROM gpu_allocations WHERE from_snapshot < :step""",
    """INSERT INTO node_metrics (node_id, from_snapshot, to_snapshot, from_t, to_t, partitions,
         available, free, free_memory_gb, unusable, unusable_spatial, unusable_topology,
         unusable_configuration, unusable_memory_gb, largest_free_block)
       SELECT node_id, from_snapshot + :off, coalesce(to_snapshot, :last) + :off,
         from_t - :shift, coalesce(to_t, :last_t) - :shift, partitions, available, free,
         free_memory_gb, unusable, unusable_spatial, unusable_topology, unusable_configuration,
         unusable_memory_gb, largest_free_block FROM node_metrics WHERE from_snapshot < :step""",
]


def replicate(store: Store, copies: int, span_s: float) -> None:
    """Add ``copies`` shifted copies of the measured period (see ``_REPLICATE``)."""
    with store.engine.begin() as conn:
        last, last_t = conn.execute(text("SELECT max(id), max(t) FROM snapshots")).one()
        assert last < ID_STEP
        for k in range(1, copies + 1):
            params = {"k": k, "off": k * ID_STEP, "shift": k * span_s, "step": ID_STEP,
                      "last": last, "last_t": last_t}  # fmt: skip
            for stmt in _REPLICATE:
                conn.execute(text(stmt), params)
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE")


def write(args: argparse.Namespace, url: str) -> dict[str, object]:
    """Simulate and store every snapshot; the write-side figures."""
    engine = make_engine(url)
    if migrate.current(engine):  # start from an empty schema
        migrate.downgrade(engine, "base")
    migrate.upgrade(engine)
    engine.dispose()
    store = Store.open(url)
    repo = Repository(store)
    writes: list[float] = []
    write_cpu: list[float] = []  # this process only: excludes the server, and other load
    computes: list[float] = []
    started = time.perf_counter()
    total = int(args.days * 1440 / args.minutes_per_snapshot)
    for i, snap in enumerate(snapshots(args), 1):
        t0 = time.perf_counter()
        report = compute(snap)
        t1, c1 = time.perf_counter(), time.process_time()
        repo.save_snapshot(snap, report)
        writes.append(time.perf_counter() - t1)
        write_cpu.append(time.process_time() - c1)
        computes.append(t1 - t0)
        if i % 500 == 0 or i == total:
            recent = sorted(writes[-500:])
            print(f"{i}/{total} snapshots, {time.perf_counter() - started:.0f} s, write "
                  f"median {statistics.median(recent) * 1e3:.1f} ms p99 "
                  f"{recent[int(len(recent) * 0.99) - 1] * 1e3:.1f} ms", file=sys.stderr,
                  flush=True)  # fmt: skip
    store.close()
    ordered = sorted(writes)
    return {
        "nodes": args.nodes,
        "gpus": sum(n.gpu_count for n in snap.nodes),
        "jobs_last_snapshot": len(snap.jobs),
        "minutes_per_snapshot": args.minutes_per_snapshot,
        "snapshots": len(writes),
        "write_ms_median": statistics.median(writes) * 1e3,
        "write_ms_p90": ordered[int(len(ordered) * 0.9) - 1] * 1e3,
        "write_ms_p99": ordered[int(len(ordered) * 0.99) - 1] * 1e3,
        "write_ms_max": ordered[-1] * 1e3,
        "write_ms_first": writes[0] * 1e3,
        "write_cpu_ms_median": statistics.median(write_cpu) * 1e3,
        "compute_ms_median": statistics.median(computes) * 1e3,
    }


def measure(url: str, days: float, plot: Path | None) -> dict[str, object]:
    """Size and ``history --since <days>d`` time of the database as it is."""
    store = Store.open(url)
    size = db_size(store, url)
    t0 = time.perf_counter()
    h = load_history(store, days * 86400)
    history_s = time.perf_counter() - t0
    cli = [str(ROOT / ".venv/bin/slurm-defrag"), "history", "--since", f"{days:g}d",
           "--db", url, "--json"]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cli, check=True, stdout=subprocess.DEVNULL, env={**os.environ})
    history_cli_s = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if plot:  # not timed: drawing is not the query
        subprocess.run([*cli[:-1], "--plot", str(plot)], check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
    figures = {
        "days": days,
        "db_bytes": size,
        "db_mb_per_day": size / 1e6 / days,
        "history_s_in_process": history_s,
        "history_s_cli": history_cli_s,
        "history_cli_cpu_s": (after.ru_utime + after.ru_stime)
        - (before.ru_utime + before.ru_stime),
        "history_points": len(h.series),
        "history_raw_snapshots": h.snapshots,
        "rows": row_counts(store),
        "load_average": os.getloadavg()[0],
    }
    store.close()
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--db", help="database URL (default: a new SQLite file in a temp dir)")
    ap.add_argument("--days", type=float, default=30.0)
    ap.add_argument("--minutes-per-snapshot", type=float, default=1.0)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, help="write the figures as JSON here too")
    ap.add_argument("--plot", type=Path, help="also run `history --plot FILE` at the end")
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="skip the simulation: measure the database as it is (after a run)",
    )
    ap.add_argument("--replicate", type=int, default=0, metavar="N",
                    help="PostgreSQL: then add N time-shifted copies of the measured period "
                    "and measure size and history again (a month-sized database)")  # fmt: skip
    args = ap.parse_args()
    url = args.db or f"sqlite:///{tempfile.mkdtemp(prefix='store-bench-')}/bench.db"
    figures: dict[str, object] = {"backend": make_engine(url).dialect.name}
    if not args.reuse:
        figures["write"] = write(args, url)
    figures["measured"] = measure(url, args.days, args.plot)
    if args.replicate:
        with Store.open(url) as store:
            replicate(store, args.replicate, args.days * 86400)
        figures["replicated"] = measure(url, args.days * (args.replicate + 1), None)
    print(json.dumps(figures, indent=1))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
