"""Benchmark of ``slurm-defrag report impact`` and ``report causes`` on a month of history.

The database is the one ``bench/store_bench.py`` builds (its ``Churn``: 1,000 nodes / 8,000
GPUs, 1-minute snapshots, ~4 job ends and arrivals a minute, jobs of 40 users in 8
accounts), written the way the service writes it: every snapshot measured and stored with
the service's mode (``dry-run`` for the first half, ``enforce`` after), plus one plan an
hour as the service would record it (requeue steps done with the GPU-hours they cost, one
plan in five aborted). Then, on the database as it is, ``--runs`` times each: both reports
in process and as the CLI (``--json``, a fresh interpreter), and ``history --since
<days>d`` on the same database, the figure the reports are held to (docs/benchmarks.md,
"Persistence").

    .venv/bin/python bench/report_bench.py --db sqlite:////tmp/report30d.db --days 30
    .venv/bin/python bench/report_bench.py --db sqlite:////tmp/report30d.db --days 30 --reuse
    .venv/bin/python bench/report_bench.py --days 1 --nodes 100     # quick, a temp SQLite

A run without ``--reuse`` wipes the database it is given. Progress goes to stderr, the
figures (JSON) to stdout.

``--base-days B`` builds only the last B days through the pipeline and fills the rest of
``--days`` with copies of them shifted back in time (new snapshot, job and plan ids; the
mode set by time again: dry-run for the first half of the month, enforce after): the rows
a month holds, for what the reports read (snapshots, group metrics, node-metric intervals,
job runs, hourly strand charges, plans and steps), in minutes instead of hours. Job
versions and GPU allocations are not copied (no report reads them over stored hours).

    .venv/bin/python bench/report_bench.py --db sqlite:////tmp/r.db --days 30 --base-days 1
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import store_bench
from slurm_defrag.metrics.cache import MetricsCache
from slurm_defrag.metrics.compute import compute
from slurm_defrag.store.database import Store
from slurm_defrag.store.plans import NewStep
from slurm_defrag.store.repo import Repository

ROOT = Path(__file__).resolve().parent.parent
PLAN_EVERY = 60
"""Snapshots between two recorded plans (one an hour at 1-minute snapshots)."""


def build(args: argparse.Namespace, url: str) -> dict[str, object]:
    """Simulate, measure and store the month, with the mode and the plans."""
    store_bench._fresh_schema(url)
    store = Store.open(url)
    repo = Repository(store)
    cache = MetricsCache()
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=args.days)
    sim = store_bench.Churn(args.nodes, seed=args.seed, start=start)
    total = store_bench.total_snapshots(args)
    per_day = round(1440 / args.minutes_per_snapshot)
    rng = random.Random(args.seed)
    started = time.perf_counter()
    plans = 0
    for i in range(1, total + 1):
        snap = sim.step(args.minutes_per_snapshot, validate=i % per_day == 0)
        mode = "dry-run" if i <= total // 2 else "enforce"
        sid = repo.save_snapshot(snap, compute(snap, cache=cache), mode)
        if i % PLAN_EVERY == 0:
            _plan(repo, snap, sid, mode, rng, aborted=plans % 5 == 4)
            plans += 1
        if i % 1000 == 0 or i == total:
            spent = time.perf_counter() - started
            print(f"{i}/{total} snapshots, {spent:.0f} s, ETA "
                  f"{spent / i * (total - i) / 60:.0f} min, load {os.getloadavg()[0]:.1f}",
                  file=sys.stderr, flush=True)  # fmt: skip
    store.close()
    return {"nodes": args.nodes, "snapshots": total, "plans": plans,
            "build_s": round(time.perf_counter() - started)}  # fmt: skip


def _plan(repo: Repository, snap: Any, sid: int, mode: str, rng: random.Random,
          *, aborted: bool) -> None:  # fmt: skip
    """One plan as the service records it: 1-3 victims requeued, their lost GPU-hours."""
    at = snap.taken_at
    running = [j for j in snap.jobs if j.holds_gpus]
    victims = rng.sample(running, min(len(running), rng.randint(1, 3)))
    steps = []
    for v in victims:
        assert v.start_time is not None
        lost = v.gpu_count * max(0.0, (at - v.start_time).total_seconds()) / 3600
        args = {"user": v.user, "lost_gpu_hours": round(lost, 3), "for_users": ""}
        state = "skipped" if aborted else "done"
        steps.append((NewStep("requeue", v.id, args), state, at + timedelta(seconds=5)))
    repo.plans.record_past(
        snap.cluster, mode, "aborted" if aborted else "done", created_at=at,
        closed_at=at + timedelta(seconds=20), steps=steps, snapshot_id=sid,
    )  # fmt: skip


_COPIED = ("snapshots", "group_metrics", "node_metrics", "job_runs", "strand_hourly", "plans",
           "plan_steps")  # fmt: skip


def replicate(url: str, days: float, base_days: float) -> dict[str, object]:
    """Fill ``days`` with copies of the ``base_days`` built, shifted back (see above)."""
    from sqlalchemy import Table, func, insert, select, update

    from slurm_defrag.store.models import (
        GroupMetric,
        JobRun,
        NodeMetric,
        Plan,
        PlanStep,
        Snapshot,
        StrandHourly,
    )

    started = time.perf_counter()
    copies = round(days / base_days) - 1
    with Store.open(url) as store, store.engine.begin() as conn:
        last, max_sid = conn.execute(select(func.max(Snapshot.t), func.max(Snapshot.id))).one()
        span = base_days * 86400
        tables: dict[str, Table] = {t: m.__table__ for t, m in (  # type: ignore[misc]
            ("snapshots", Snapshot), ("group_metrics", GroupMetric), ("node_metrics", NodeMetric),
            ("job_runs", JobRun), ("strand_hourly", StrandHourly), ("plans", Plan),
            ("plan_steps", PlanStep))}  # fmt: skip
        base = {name: [dict(r._mapping) for r in conn.execute(select(t))]
                for name, t in tables.items()}  # fmt: skip
        max_id = {name: max((r.get("id") or 0 for r in rows), default=0)
                  for name, rows in base.items()}  # fmt: skip
        max_ref = max((r["job_ref"] for r in base["job_runs"]), default=0)
        for k in range(1, copies + 1):
            # Older copies get smaller snapshot ids (zero and below): ids grow with time.
            dt, shift_sid = -k * span, -k * max_sid
            delta = timedelta(seconds=dt)
            out: dict[str, list[dict[str, Any]]] = {}
            out["snapshots"] = [
                {**r, "id": r["id"] + shift_sid, "t": r["t"] + dt,
                 "taken_at": r["taken_at"] + delta, "saved_at": r["saved_at"] + delta}
                for r in base["snapshots"]
            ]  # fmt: skip
            out["group_metrics"] = [{**r, "snapshot_id": r["snapshot_id"] + shift_sid,
                                     "t": r["t"] + dt} for r in base["group_metrics"]]  # fmt: skip
            out["node_metrics"] = [
                {**r, "id": r["id"] + k * max_id["node_metrics"],
                 "from_snapshot": r["from_snapshot"] + shift_sid,
                 "to_snapshot": (r["to_snapshot"] or max_sid + 1) + shift_sid,
                 "from_t": r["from_t"] + dt, "to_t": (r["to_t"] or last + 60) + dt}
                for r in base["node_metrics"]
            ]  # a copy's open intervals close where the copy ends  # fmt: skip
            out["job_runs"] = [
                {**r, "id": r["id"] + k * max_id["job_runs"], "job_id": f"{r['job_id']}.{k}",
                 "job_ref": r["job_ref"] + k * max_ref,
                 **{c: (r[c] + dt if r[c] is not None else None)
                    for c in ("submit_t", "start_t", "seen_t", "requeued_t")}}
                for r in base["job_runs"]
            ]  # fmt: skip
            out["strand_hourly"] = [
                {**r, "id": r["id"] + k * max_id["strand_hourly"], "hour_t": r["hour_t"] + dt}
                for r in base["strand_hourly"]
            ]
            out["plans"] = [{**r, "id": r["id"] + k * max_id["plans"], "snapshot_id": None,
                             "created_at": r["created_at"] + delta,
                             "closed_at": r["closed_at"] and r["closed_at"] + delta}
                            for r in base["plans"]]  # fmt: skip
            out["plan_steps"] = [
                {**r, "id": r["id"] + k * max_id["plan_steps"],
                 "plan_id": r["plan_id"] + k * max_id["plans"],
                 "started_at": r["started_at"] and r["started_at"] + delta,
                 "finished_at": r["finished_at"] and r["finished_at"] + delta}
                for r in base["plan_steps"]
            ]  # fmt: skip
            for name in _COPIED:
                if out[name]:
                    conn.execute(insert(tables[name]), out[name])
            print(f"copy {k}/{copies}", file=sys.stderr, flush=True)
        # The service's modes by time again: dry-run the first half of the month.
        lo = conn.scalar(select(func.min(Snapshot.t)))
        mid = (lo + last) / 2
        conn.execute(update(Snapshot).values(mode="dry-run").where(Snapshot.t < mid))
        conn.execute(update(Snapshot).values(mode="enforce").where(Snapshot.t >= mid))
        cut = datetime.fromtimestamp(mid, UTC)
        conn.execute(update(Plan).values(mode="dry-run").where(Plan.created_at < cut))
        conn.execute(update(Plan).values(mode="enforce").where(Plan.created_at >= cut))
    return {
        "copies": copies,
        "base_days": base_days,
        "replicate_s": round(time.perf_counter() - started),
    }


def _time_cli(argv: list[str], runs: int) -> tuple[list[float], list[float]]:
    wall, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        wall.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return wall, cpu


def measure(url: str, days: float, runs: int) -> dict[str, object]:
    """In process and end to end, ``runs`` times each: impact, causes, history."""
    from slurm_defrag.store.causes import load_causes
    from slurm_defrag.store.frag_history import load_history
    from slurm_defrag.store.impact import ChangePoint, load_impact

    since = days * 86400
    exe = str(ROOT / ".venv/bin/slurm-defrag")
    if not Path(exe).exists():
        exe = str(Path(sys.executable).parent / "slurm-defrag")
    calls: dict[str, tuple[Any, list[str]]] = {
        "impact": (
            lambda s: load_impact(s, since, ChangePoint.parse("mode")),
            ["report", "impact", "--since", f"{days:g}d", "--change-at", "mode"],
        ),
        "causes": (lambda s: load_causes(s, since), ["report", "causes", "--since", f"{days:g}d"]),
        "history": (lambda s: load_history(s, since), ["history", "--since", f"{days:g}d"]),
    }
    out: dict[str, object] = {"days": days}
    with Store.open(url) as store:
        for name, (call, argv) in calls.items():
            inproc = []
            for _ in range(runs):
                t0 = time.perf_counter()
                call(store)
                inproc.append(time.perf_counter() - t0)
            wall, cpu = _time_cli([exe, *argv, "--db", url, "--json"], runs)
            out[name] = {
                "in_process_s": round(statistics.median(inproc), 3),
                "in_process_runs": [round(x, 3) for x in inproc],
                "cli_s": round(statistics.median(wall), 3),
                "cli_runs": [round(x, 3) for x in wall],
                "cli_cpu_s": round(statistics.median(cpu), 3),
            }
            print(f"{name}: {out[name]}", file=sys.stderr, flush=True)
        out["rows"] = {**store_bench.row_counts(store), **_more_rows(store)}
    out["load_average"] = os.getloadavg()[0]
    return out


def _more_rows(store: Store) -> dict[str, int]:
    from sqlalchemy import text

    with store.engine.connect() as conn:
        return {
            t: int(conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one())
            for t in ("job_runs", "plans", "plan_steps")
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--db", help="database URL (default: a new SQLite file in a temp dir)")
    ap.add_argument("--days", type=float, default=30.0)
    ap.add_argument("--minutes-per-snapshot", type=float, default=1.0)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5, help="timed runs of each (medians)")
    ap.add_argument("--reuse", action="store_true", help="measure the database as it is")
    ap.add_argument("--build-only", action="store_true", help="build, do not measure")
    ap.add_argument(
        "--base-days",
        type=float,
        help="build only the last N days, copy them back to --days (see above)",
    )
    ap.add_argument(
        "--replicate-only",
        action="store_true",
        help="with --base-days: copy a base already built (--days N --build-only)",
    )
    ap.add_argument("--out", type=Path, help="write the figures as JSON here too")
    args = ap.parse_args()
    url = args.db or f"sqlite:///{tempfile.mkdtemp(prefix='report-bench-')}/bench.db"
    figures: dict[str, object] = {"db": url}
    if args.base_days and not args.reuse:
        if not args.replicate_only:
            month = args.days
            args.days = args.base_days
            figures["build"] = build(args, url)
            args.days = month
        figures["replicate"] = replicate(url, args.days, args.base_days)
    elif not args.reuse:
        figures["build"] = build(args, url)
    if not args.build_only:
        figures["measured"] = measure(url, args.days, args.runs)
    print(json.dumps(figures, indent=1))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
