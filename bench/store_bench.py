"""Persistence benchmark: months of 1-minute snapshots of a 1,000-node / 8,000-GPU cluster.

The cluster evolves incrementally, as a real one does between two reads: each minute a few
jobs end (Poisson), new ones arrive and start on random free GPUs when they fit (which is
what fragments nodes), pending jobs start when space appears, and only the nodes touched
get a new ``Node`` (GresUsed indices and IDLE/MIXED/ALLOCATED state). Unchanged nodes and
jobs are the *same objects* from one snapshot to the next, like a reader that caches.

Every snapshot is generated, measured (``compute``, with a :class:`MetricsCache` kept
across snapshots as the service keeps one) and written through
``Repository.save_snapshot``. Measured: write time per snapshot (one transaction), metrics
time (reported apart: it is not storage), database size, and the time of
``slurm-defrag history --since <days>d`` (in process, and as the CLI in a subprocess;
``--runs`` times each, medians).

    URL=$(scripts/postgres.sh start)
    .venv/bin/python bench/store_bench.py --db "$URL" --days 30 --out pg30d.json
    .venv/bin/python bench/store_bench.py --db "$URL" --days 30 --resume  # after a crash
    .venv/bin/python bench/store_bench.py --db "$URL" --days 30 --reuse --vacuum
    .venv/bin/python bench/store_bench.py --days 1 --minutes-per-snapshot 5   # SQLite, quick

A run without ``--reuse``/``--resume`` wipes the database it is given (downgrade to base,
upgrade). Per-snapshot timings are appended to ``--timings`` as the run goes, so that an
interrupted run continues with ``--resume``: the simulation is deterministic, so it is
replayed (without snapshots or metrics) up to the last stored snapshot, then goes on.
Progress (every 500 snapshots, with an ETA) goes to stderr, the figures to stdout.
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
from typing import Any

from sqlalchemy import text

from slurm_defrag.domain.cluster import ClusterSnapshot, GpuRequest, Job, JobState, Node
from slurm_defrag.metrics.cache import MetricsCache
from slurm_defrag.metrics.compute import compute
from slurm_defrag.store import migrate
from slurm_defrag.store.database import Store
from slurm_defrag.store.engine import make_engine
from slurm_defrag.store.frag_history import load_history
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

    def step(self, minutes: float = 1.0, validate: bool = True) -> ClusterSnapshot:
        self.advance(minutes)
        return self.snapshot(validate)

    def advance(self, minutes: float = 1.0) -> None:
        """Evolve the cluster by ``minutes`` (no snapshot: a resumed run fast-forwards)."""
        self.t += timedelta(minutes=minutes)
        touched: set[str] = set()
        for _ in range(min(len(self.running), _poisson(self.rng, self.ends * minutes))):
            job = self.running.pop(self.rng.choice(list(self.running)))
            for node, idx in job.gpus.items():
                self.free[node] |= idx
                touched.add(node)
        # From here on GPUs are only taken, never freed: a shape that did not fit once
        # this minute will not fit later in it, so it is not searched for again.
        no_room: set[tuple[object, ...]] = set()
        for job in sorted(self.pending.values(), key=lambda j: -j.priority):
            if self._start(job, touched, no_room):
                del self.pending[job.id]
        for _ in range(_poisson(self.rng, self.arrivals * minutes)):
            job = self._new_job()
            if not self._start(job, touched, no_room) and len(self.pending) < 60:
                self.pending[job.id] = job
        self._refresh(touched)

    def snapshot(self, validate: bool = False) -> ClusterSnapshot:
        """The cluster now. Its nodes and jobs are validated models already; checking the
        whole snapshot (unique names, GPU indices held once, ...) costs about half as much
        as the incremental metrics pass, so it is done only when asked (``validate``: once
        per simulated day in a run)."""
        jobs = sorted((*self.running.values(), *self.pending.values()), key=lambda j: int(j.id))
        fields: dict[str, Any] = {
            "cluster": self.cluster, "taken_at": self.t, "source": "simulator",
            "nodes": tuple(self.nodes[n] for n in self.order), "jobs": tuple(jobs),
            "partitions": self.partitions,
        }  # fmt: skip
        if validate:
            return ClusterSnapshot(**fields)
        return ClusterSnapshot.model_construct(**fields)

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

    def _start(self, job: Job, touched: set[str], no_room: set[tuple[object, ...]]) -> bool:
        """Start ``job`` on random nodes with room, on random free GPUs (no packing)."""
        req = job.request
        assert req is not None
        shape = req.per_node_shape() or (1, req.gpus)
        n_nodes, k = shape
        need = (n_nodes, k, job.partition, req.gpu_model)
        if need in no_room:
            return False
        fits = [
            n for n, f in self.free.items()
            if n in self.usable and len(f) >= k and job.partition in self.nodes[n].partitions
            and req.gpu_model in (None, self.nodes[n].gpu_model)
        ]  # fmt: skip
        if len(fits) < n_nodes:
            no_room.add(need)
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


def snapshots(args: argparse.Namespace, start: datetime, done: int) -> Iterator[ClusterSnapshot]:
    """The run's snapshots after the first ``done`` (replayed without building snapshots)."""
    sim = Churn(args.nodes, seed=args.seed, start=start)
    for _ in range(done):  # the simulation is deterministic given the seed and start
        sim.advance(args.minutes_per_snapshot)
    per_day = round(1440 / args.minutes_per_snapshot)
    for i in range(done, total_snapshots(args)):
        yield sim.step(args.minutes_per_snapshot, validate=i % per_day == 0)


def total_snapshots(args: argparse.Namespace) -> int:
    return int(args.days * 1440 / args.minutes_per_snapshot)


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


# Per-snapshot timings, one CSV line each, appended as the run goes: what a resumed run
# reads back so its figures cover every snapshot, not just those after the interruption.
TIMING_FIELDS = ("write_s", "write_cpu_s", "compute_s", "load1")


def _fresh_schema(url: str) -> None:
    engine = make_engine(url)
    if migrate.current(engine):
        migrate.downgrade(engine, "base")
    migrate.upgrade(engine)
    engine.dispose()


def _resume_point(store: Store, args: argparse.Namespace) -> tuple[datetime, int]:
    """(start of the simulated period, snapshots already stored) of an interrupted run."""
    with store.engine.connect() as conn:
        count, first = conn.execute(text("SELECT count(*), min(taken_at) FROM snapshots")).one()
    if not count:
        sys.exit("--resume: the database holds no snapshot; start a run without --resume")
    first = first if first.tzinfo else first.replace(tzinfo=UTC)
    return first - timedelta(minutes=args.minutes_per_snapshot), int(count)


def _read_timings(path: Path, keep: int) -> list[tuple[float, ...]]:
    """The first ``keep`` timing lines of ``path``; the file is rewritten to hold only them."""
    lines = path.read_text().splitlines()[1:] if path.exists() else []
    if len(lines) < keep:  # killed between a commit and its timing line: rare, say so
        print(f"--resume: {path} has {len(lines)} timings for {keep} stored snapshots",
              file=sys.stderr)  # fmt: skip
    rows = [tuple(float(x) for x in line.split(",")) for line in lines[:keep]]
    path.write_text("\n".join([",".join(TIMING_FIELDS), *lines[:keep]]) + "\n")
    return rows


def _pct(ordered: list[float], q: float) -> float:
    return ordered[max(0, int(len(ordered) * q) - 1)]


def write(args: argparse.Namespace, url: str) -> dict[str, object]:
    """Simulate, measure and store every snapshot; the write-side figures.

    Each snapshot goes through the metrics pass (``compute``, with a cache kept across
    snapshots like the service keeps one) and ``Repository.save_snapshot``. ``--resume``
    continues an interrupted run: it replays the simulation up to the last stored snapshot.
    """
    timings_path: Path = args.timings
    if args.resume:
        store = Store.open(url)
        start, done = _resume_point(store, args)
        rows = _read_timings(timings_path, done)
        print(f"resuming after snapshot {done}", file=sys.stderr, flush=True)
    else:
        _fresh_schema(url)  # start from an empty schema
        store = Store.open(url)
        # End the simulated period now, so `history --since Nd` sees (nearly) all of it.
        start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=args.days)
        done, rows = 0, []
        timings_path.write_text(",".join(TIMING_FIELDS) + "\n")
    repo = Repository(store)
    cache = MetricsCache()
    total = total_snapshots(args)
    started = time.perf_counter()
    snap = None
    with timings_path.open("a") as log:
        for i, snap in enumerate(snapshots(args, start, done), done + 1):
            t0 = time.perf_counter()
            report = compute(snap, cache=cache)
            t1, c1 = time.perf_counter(), time.process_time()
            repo.save_snapshot(snap, report)
            row = (time.perf_counter() - t1, time.process_time() - c1, t1 - t0,
                   os.getloadavg()[0])  # fmt: skip
            rows.append(row)
            log.write(",".join(f"{x:.6f}" for x in row) + "\n")
            log.flush()
            if i % 500 == 0 or i == total:
                _progress(i, total, done, rows, time.perf_counter() - started)
    store.close()
    if snap is None:
        sys.exit("nothing to write: the database already holds the whole run")
    return {
        "nodes": args.nodes,
        "gpus": sum(n.gpu_count for n in snap.nodes),
        "jobs_last_snapshot": len(snap.jobs),
        "minutes_per_snapshot": args.minutes_per_snapshot,
        "resumed_after": done,
        **timing_figures(rows),
    }


def _progress(i: int, total: int, done: int, rows: list[tuple[float, ...]], elapsed: float) -> None:
    recent = sorted(r[0] for r in rows[-500:])
    eta = elapsed / (i - done) * (total - i)
    print(f"{i}/{total} snapshots, {elapsed:.0f} s, ETA {eta / 60:.0f} min; last 500: write "
          f"median {statistics.median(recent) * 1e3:.1f} ms p99 {_pct(recent, 0.99) * 1e3:.1f} ms,"
          f" compute median {statistics.median(r[2] for r in rows[-500:]) * 1e3:.1f} ms, "
          f"load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)  # fmt: skip


def timing_figures(rows: list[tuple[float, ...]], window: int = 2880) -> dict[str, object]:
    """Write/compute statistics of a run, overall and per ``window`` snapshots (2 days)."""
    writes = [r[0] for r in rows]
    ordered = sorted(writes)
    windows = []
    for k in range(0, len(rows), window):
        part = rows[k : k + window]
        w = sorted(r[0] for r in part)
        windows.append({
            "snapshots": f"{k + 1}-{k + len(part)}",
            "write_ms_median": round(statistics.median(w) * 1e3, 1),
            "write_ms_p99": round(_pct(w, 0.99) * 1e3, 1),
            "load1_mean": round(statistics.fmean(r[3] for r in part), 2),
        })  # fmt: skip
    return {
        "snapshots": len(rows),
        "write_ms_median": statistics.median(writes) * 1e3,
        "write_ms_p90": _pct(ordered, 0.9) * 1e3,
        "write_ms_p99": _pct(ordered, 0.99) * 1e3,
        "write_ms_max": ordered[-1] * 1e3,
        "write_ms_first": writes[0] * 1e3,
        "write_cpu_ms_median": statistics.median(r[1] for r in rows) * 1e3,
        "compute_ms_median": statistics.median(r[2] for r in rows) * 1e3,
        "load1_mean": statistics.fmean(r[3] for r in rows),
        "load1_max": max(r[3] for r in rows),
        "windows": windows,
    }


def measure(url: str, days: float, plot: Path | None, runs: int) -> dict[str, object]:
    """Size and ``history --since <days>d`` time of the database as it is (``runs`` times)."""
    store = Store.open(url)
    size = db_size(store, url)
    in_process = []
    for _ in range(runs):
        t0 = time.perf_counter()
        h = load_history(store, days * 86400)
        in_process.append(time.perf_counter() - t0)
    cli = [str(ROOT / ".venv/bin/slurm-defrag"), "history", "--since", f"{days:g}d",
           "--db", url, "--json"]  # fmt: skip
    wall, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cli, check=True, stdout=subprocess.DEVNULL)
        wall.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    if plot:  # not timed: drawing is not the query
        subprocess.run([*cli[:-1], "--plot", str(plot)], check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
    figures = {
        "days": days,
        "db_bytes": size,
        "db_mb_per_day": size / 1e6 / days,
        "history_s_in_process": statistics.median(in_process),
        "history_s_in_process_runs": [round(x, 3) for x in in_process],
        "history_s_cli": statistics.median(wall),
        "history_s_cli_runs": [round(x, 3) for x in wall],
        "history_cli_cpu_s": statistics.median(cpu),
        "history_points": len(h.series),
        "history_raw_snapshots": h.snapshots,
        "rows": row_counts(store),
        "load_average": os.getloadavg()[0],
    }
    store.close()
    return figures


def vacuum(url: str) -> dict[str, int]:
    """PostgreSQL: the size after ``VACUUM ANALYZE``, then after ``VACUUM FULL``."""
    sizes = {}
    with Store.open(url) as store:
        for stmt in ("VACUUM ANALYZE", "VACUUM FULL ANALYZE"):
            with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
                c.exec_driver_sql(stmt)
            sizes[stmt] = db_size(store, url)
    return sizes


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
    ap.add_argument(
        "--runs",
        type=int,
        default=5,
        help="history runs, in process and as the CLI (medians reported)",
    )
    ap.add_argument("--vacuum", action="store_true",
                    help="PostgreSQL: then VACUUM and measure the size again")  # fmt: skip
    ap.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted run on the same --db and --timings",
    )
    ap.add_argument("--timings", type=Path, default=Path("/tmp/store_bench_timings.csv"),
                    help="per-snapshot timings CSV, appended as the run goes "
                    "(default: %(default)s)")  # fmt: skip
    args = ap.parse_args()
    if args.resume and not args.db:
        ap.error("--resume needs the --db of the interrupted run")
    url = args.db or f"sqlite:///{tempfile.mkdtemp(prefix='store-bench-')}/bench.db"
    figures: dict[str, object] = {"backend": make_engine(url).dialect.name}
    if not args.reuse:
        figures["write"] = write(args, url)
    figures["measured"] = measure(url, args.days, args.plot, args.runs)
    if args.vacuum:
        figures["db_bytes_after"] = vacuum(url)
    print(json.dumps(figures, indent=1))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
