"""Queries behind ``slurm-defrag report impact``: what the service did for the cluster.

The window (``--since``, ending now or at the last snapshot) is cut at a change point: a
time, or where the service's mode switched from dry-run to enforce as recorded (the first
snapshot stored in ``enforce`` after the last one stored in ``dry-run``; for databases
written before the snapshots carried the mode, the first enforce plan after the last
dry-run plan). For each period, from what is stored:

* job waits (hours from submit to start): every GPU job whose first start the snapshots
  recorded (``job_runs``), counted in the period it was *submitted and started* in (a job
  waiting across the change belongs to neither: it is counted apart), for all jobs and for
  large ones (at least ``large_gpus`` GPUs); ``sacct`` records, when given, replace the
  submit and start times of the jobs they name and add the GPU jobs the snapshots missed;
* falsely starved GPU-hours: the GPUs the falsely starved jobs ask for, averaged over the
  snapshots and multiplied by the hours the period covers;
* unusable GPUs by cause and FGD: their means over the snapshots (cluster figures);
* plans done, aborted and failed; requeues done by enforce plans and the GPU-hours they
  cost (the plans' own price), and the requeues dry-run plans would have done.

Each figure is compared after minus before with a bootstrap confidence interval
(:mod:`slurm_defrag.metrics.bootstrap`). Snapshot figures and job waits are summed per
block in SQL (portable: epoch-second arithmetic, no date functions; the waits also per
whole minute, for the quantiles), a month's plans are few enough to read row by row.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Integer, case, cast, func, select

from slurm_defrag.domain.accounting import AccountedJob
from slurm_defrag.errors import InputError
from slurm_defrag.metrics.bootstrap import (
    RESAMPLES,
    Blocks,
    Interval,
    Resampler,
    block_seconds,
)
from slurm_defrag.store.database import Store
from slurm_defrag.store.database_errors import NotFound
from slurm_defrag.store.frag_history import MAX_POINTS, RESOLUTIONS
from slurm_defrag.store.models import (
    GroupMetric,
    GroupMetricHourly,
    JobRun,
    Plan,
    PlanStep,
    RollupProgress,
    Snapshot,
)
from slurm_defrag.timespec import parse_duration

HOUR = 3600.0
DAY = 86400.0
LARGE_GPUS = 4
"""Default for "large": the simulator's large-job goal (Protocol B) uses the same bound."""

GAUGES = ("unusable", "unusable_spatial", "unusable_topology", "unusable_configuration", "fgd",
          "falsely_starved_gpus")  # fmt: skip
"""Cluster figures averaged over the snapshots (group_metrics, scope ``cluster``)."""


# -- the change point ----------------------------------------------------------------------


@dataclass(frozen=True)
class ChangePoint:
    """``mode`` (find the recorded switch), or a time (epoch seconds)."""

    at: float | None

    @property
    def mode(self) -> bool:
        return self.at is None

    @classmethod
    def parse(cls, text: str, now: float | None = None) -> ChangePoint:
        """``mode``, an ISO time (``2026-12-01T14:00Z``; no zone: UTC) or a duration
        before now (``3d``)."""
        value = text.strip()
        if value.lower() == "mode":
            return cls(None)
        now = time.time() if now is None else now
        if re.fullmatch(r"[0-9.]+\s*[smhdw]", value, re.ASCII):
            try:
                return cls(now - parse_duration(value))
            except InputError:
                pass
        try:
            t = datetime.fromisoformat(value.replace(" ", "T", 1))
        except ValueError:
            raise InputError(
                f"--change-at: {text[:40]!r} is not 'mode', a time like 2026-12-01T14:00Z or "
                "a duration before now like 3d"
            ) from None
        if not 1970 <= t.year <= 2199:
            raise InputError(f"--change-at: {text[:40]!r} is outside the years 1970..2199")
        return cls((t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp())


# -- what the report holds -------------------------------------------------------------------


@dataclass(frozen=True)
class Period:
    name: str
    """``before`` or ``after``."""
    start: datetime
    end: datetime
    hours: float
    """Hours of the period with snapshots to speak for them."""
    snapshots: int
    jobs: int
    wait_mean_h: float | None
    wait_median_h: float | None
    wait_p90_h: float | None
    large_jobs: int
    large_wait_mean_h: float | None
    large_wait_median_h: float | None
    falsely_starved_gpu_hours: float | None
    unusable: float | None
    unusable_spatial: float | None
    unusable_topology: float | None
    unusable_configuration: float | None
    fgd: float | None
    plans: dict[str, int]
    """Plans created in the period, by status (done, aborted, failed, open, applying)."""
    plan_modes: dict[str, int]
    requeues: int
    """Requeues done by enforce plans."""
    gpu_hours_lost: float
    """GPU-hours of work those requeues cost (as their plans priced them)."""
    dry_run_requeues: int
    """Requeues dry-run plans would have done."""


@dataclass(frozen=True)
class Comparison:
    key: str
    label: str
    unit: str
    better: str
    """``lower`` or ``higher``: which way is an improvement."""
    before: float | None
    after: float | None
    difference: float | None
    low: float | None
    high: float | None


def verdict(c: Comparison) -> str:
    """``better`` / ``worse`` when the interval leaves zero out (``lower`` / ``higher`` for
    a figure without a better direction), else ``no clear change``."""
    if c.difference is None:
        return "no data"
    if c.low is None or c.high is None:
        return "no interval"
    if c.low <= 0 <= c.high:
        return "no clear change"
    lower = c.high < 0
    if not c.better:
        return "lower" if lower else "higher"
    return "better" if lower == (c.better == "lower") else "worse"


@dataclass(frozen=True)
class ImpactPoint:
    """Means over one bucket of the series (cluster figures)."""

    t: datetime
    samples: int
    unusable: float
    unusable_spatial: float | None
    unusable_topology: float | None
    unusable_configuration: float | None
    fgd: float
    falsely_starved_gpus: float | None


@dataclass(frozen=True)
class Impact:
    cluster: str
    since: datetime
    until: datetime
    change_at: datetime
    change: str
    """How the change point was found, in words."""
    large_gpus: int
    block_s: float
    blocks: tuple[int, int]
    """Blocks of the before and after periods (the bootstrap's units)."""
    resamples: int
    seed: int
    waits_from: str
    straddling: int
    """Jobs submitted before the change and started after it (in no period's waits)."""
    before: Period
    after: Period
    comparisons: list[Comparison]
    resolution_s: int
    series: list[ImpactPoint]
    notes: list[str] = field(default_factory=list)


# -- loading -------------------------------------------------------------------------------


@dataclass
class _Span:
    """One period being assembled: its bounds and blocks."""

    name: str
    a: float
    b: float
    block_s: float

    @property
    def n_blocks(self) -> int:
        return max(1, math.ceil((self.b - self.a) / self.block_s - 1e-9))

    def block_of(self, t: float) -> int:
        return min(self.n_blocks - 1, max(0, int((t - self.a) // self.block_s)))

    def block_days(self) -> tuple[float, ...]:
        return tuple(
            (min(self.b, self.a + (i + 1) * self.block_s) - (self.a + i * self.block_s)) / DAY
            for i in range(self.n_blocks)
        )


def load_impact(
    store: Store,
    since_s: float,
    change: ChangePoint,
    *,
    cluster: str | None = None,
    now: float | None = None,
    large_gpus: int = LARGE_GPUS,
    sacct: Sequence[AccountedJob] | None = None,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Impact:
    """The impact report over ``[now - since_s, now]`` cut at ``change``.

    Raises
    ------
    NotFound
        No snapshot in the database, in the window, or no recorded mode switch.
    InputError
        The change point leaves a period empty.
    """
    now = time.time() if now is None else now
    start = now - since_s
    with store.engine.connect() as conn:
        cluster = cluster or _latest_cluster(conn)
        first, last, step = _extent(conn, cluster, start, now)
        end = min(now, last + step)
        at, how = _change_at(conn, cluster, change, start, end)
        if not first < at < end:
            raise InputError(
                f"--change-at: {_utc(at)} is not inside the data of the window "
                f"({_utc(first)} to {_utc(end)}): one period would be empty; "
                "move it or widen --since"
            )
        shortest = min(at - first, end - at)
        block = block_seconds(shortest, step)
        spans = [_Span("before", first, at, block), _Span("after", at, end, block)]
        gauges = [_gauge_blocks(conn, cluster, s) for s in spans]
        waits, straddling, waits_from = _waits(conn, cluster, spans, sacct, large_gpus)
        plans = [_plans(conn, cluster, s) for s in spans]
        resolution = _resolution(end - first, step)
        series = _series(conn, cluster, first, end, resolution)
    resampler = Resampler(resamples, seed)
    periods = [_period(s, g, w, p) for s, g, w, p in zip(spans, gauges, waits, plans, strict=True)]
    comparisons = _comparisons(spans, gauges, waits, plans, large_gpus, resampler)
    notes = _notes(gauges, spans)
    return Impact(
        cluster=cluster, since=_dt(start), until=_dt(end), change_at=_dt(at), change=how,
        large_gpus=large_gpus, block_s=block, blocks=(spans[0].n_blocks, spans[1].n_blocks),
        resamples=resamples, seed=seed, waits_from=waits_from, straddling=straddling,
        before=periods[0], after=periods[1], comparisons=comparisons,
        resolution_s=resolution, series=series, notes=notes,
    )  # fmt: skip


def _dt(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def _utc(t: float) -> str:
    return f"{_dt(t):%Y-%m-%d %H:%M} UTC"


def _latest_cluster(conn: Connection) -> str:
    row = conn.execute(select(Snapshot.cluster).order_by(Snapshot.id.desc()).limit(1)).first()
    if row is None:
        raise NotFound("no snapshots in the database yet: nothing to report")
    return str(row[0])


def _extent(conn: Connection, cluster: str, start: float, now: float) -> tuple[float, float, float]:
    """(first data time, last snapshot time, seconds between snapshots) of the window; raw
    snapshots, or hourly rollups where they were pruned."""
    n, lo, hi = conn.execute(
        select(func.count(), func.min(Snapshot.t), func.max(Snapshot.t)).where(
            Snapshot.cluster == cluster, Snapshot.t >= start, Snapshot.t <= now
        )
    ).one()
    hourly = conn.scalar(
        select(func.min(GroupMetricHourly.hour_t)).where(
            GroupMetricHourly.cluster == cluster,
            GroupMetricHourly.scope == "cluster",
            GroupMetricHourly.hour_t >= math.floor(start / HOUR) * HOUR,
        )
    )
    if not n and hourly is None:
        newest = conn.scalar(select(func.max(Snapshot.t)).where(Snapshot.cluster == cluster))
        where = f"the newest is from {_utc(newest)}" if newest is not None else "none at all"
        raise NotFound(
            f"no snapshots of cluster {cluster!r} in this window ({where}): widen --since"
        )
    step = (hi - lo) / (n - 1) if n > 1 else 60.0
    first = min(x for x in (lo, None if hourly is None else max(hourly, start)) if x is not None)
    last = hi if hi is not None else float(hourly) + HOUR - step
    return float(first), float(last), float(step)


def _change_at(
    conn: Connection, cluster: str, change: ChangePoint, start: float, end: float
) -> tuple[float, str]:
    if change.at is not None:
        return change.at, "given (--change-at)"
    s = Snapshot
    dry = conn.scalar(
        select(func.max(s.t)).where(s.cluster == cluster, s.mode == "dry-run", s.t <= end)
    )
    if dry is not None:
        enforce = conn.scalar(
            select(func.min(s.t)).where(s.cluster == cluster, s.mode == "enforce", s.t > dry)
        )
        if enforce is not None:
            return float(enforce), "the service's switch from dry-run to enforce (snapshots)"
    recorded = conn.scalar(select(func.count()).where(s.cluster == cluster, s.mode.is_not(None)))
    if not recorded:  # stored before snapshots carried the mode: the plans do
        p = Plan
        dry_plan = conn.scalar(
            select(func.max(p.created_at)).where(p.cluster == cluster, p.mode == "dry-run")
        )
        if dry_plan is not None:
            first_enforce = conn.scalar(
                select(func.min(p.created_at)).where(
                    p.cluster == cluster, p.mode == "enforce", p.created_at > dry_plan
                )
            )
            if first_enforce is not None:
                return first_enforce.timestamp(), "the first enforce plan after a dry-run plan"
    raise NotFound(
        f"--change-at mode: no switch from dry-run to enforce is recorded for cluster "
        f"{cluster!r} up to {_utc(end)}; give the time with --change-at 2026-12-01T14:00Z"
    )


def _gauge_blocks(conn: Connection, cluster: str, span: _Span) -> dict[str, Any]:
    """Per block: snapshots, and per gauge (sum, count of non-NULL); raw rows, then the
    hourly rollups for the part already pruned (each hour weighs its samples)."""
    rolled = conn.scalar(
        select(RollupProgress.rolled_until_t).where(RollupProgress.cluster == cluster)
    )
    split = max(span.a, min(span.b, rolled or span.a))
    sums: dict[str, list[float]] = {g: [0.0] * span.n_blocks for g in GAUGES}
    counts: dict[str, list[float]] = {g: [0.0] * span.n_blocks for g in GAUGES}
    samples = [0.0] * span.n_blocks
    g = GroupMetric
    block = _block_expr(conn, g.t, span)
    rows = conn.execute(
        select(block, func.count(), *(func.sum(getattr(g, c)) for c in GAUGES),
               *(func.count(getattr(g, c)) for c in GAUGES))
        .where(g.cluster == cluster, g.scope == "cluster", g.t >= split, g.t < span.b)
        .group_by(block)
    )  # fmt: skip
    for i, n, *values in rows:
        k = min(span.n_blocks - 1, max(0, int(i)))
        samples[k] += n
        for j, name in enumerate(GAUGES):
            sums[name][k] += float(values[j] or 0.0)
            counts[name][k] += float(values[len(GAUGES) + j] or 0)
    if split > span.a:
        h = GroupMetricHourly
        for hour_t, n, *values in conn.execute(
            select(h.hour_t, h.samples, *(getattr(h, c) for c in GAUGES)).where(
                h.cluster == cluster, h.scope == "cluster", h.hour_t >= span.a, h.hour_t < split
            )
        ):
            k = span.block_of(hour_t)
            samples[k] += n
            for name, v in zip(GAUGES, values, strict=True):
                if v is not None:
                    sums[name][k] += v * n
                    counts[name][k] += n
    return {"samples": samples, "sums": sums, "counts": counts}


def _block_expr(conn: Connection, t: Any, span: _Span) -> Any:
    return _floor(conn, (t - span.a) / span.block_s).label("block")  # t >= a


@dataclass
class _Waits:
    """The waits of one period, per class (``all``, ``large``): per block the sum of waits
    (hours) and the number of jobs (by start time), and how many jobs waited each whole
    minute (the quantiles)."""

    n_blocks: int
    sums: dict[str, list[float]] = field(default_factory=dict)
    counts: dict[str, list[float]] = field(default_factory=dict)
    minutes: dict[str, Counter[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for c in ("all", "large"):
            self.sums[c] = [0.0] * self.n_blocks
            self.counts[c] = [0.0] * self.n_blocks
            self.minutes[c] = Counter()

    def add(self, block: int, large: bool, n: float, wait_h: float) -> None:
        for c in ("all", "large") if large else ("all",):
            self.sums[c][block] += wait_h
            self.counts[c][block] += n

    def jobs(self, c: str) -> int:
        return int(sum(self.counts[c]))

    def mean(self, c: str) -> float | None:
        n = sum(self.counts[c])
        return sum(self.sums[c]) / n if n else None

    def quantile(self, c: str, q: float) -> float | None:
        """Nearest rank, to the minute (rounded down), in hours."""
        hist = self.minutes[c]
        n = sum(hist.values())
        if not n:
            return None
        rank, seen = max(1, math.ceil(q * n)), 0
        for minute in sorted(hist):
            seen += hist[minute]
            if seen >= rank:
                return minute / 60
        return None  # pragma: no cover


def _waits(
    conn: Connection,
    cluster: str,
    spans: list[_Span],
    sacct: Sequence[AccountedJob] | None,
    large: int,
) -> tuple[list[_Waits], int, str]:
    """Per period, the waits of the jobs submitted and started in it; the jobs waiting
    across the change; where the times came from."""
    if sacct is not None:
        return _waits_with_sacct(conn, cluster, spans, sacct, large)
    out = []
    r = JobRun
    wait = r.start_t - r.submit_t
    big = case((r.gpus >= large, 1), else_=0)
    for span in spans:
        w = _Waits(span.n_blocks)
        # submitted and started in the period: its start in it, its submit not before it
        where = (r.cluster == cluster, r.run == 0, r.start_t >= span.a, r.start_t < span.b,
                 r.submit_t >= span.a, r.submit_t <= r.start_t)  # fmt: skip
        block = _block_expr(conn, r.start_t, span)
        minute = _floor(conn, wait / 60).label("minute")
        # One pass: per block, class and whole minute of wait (a few thousand groups).
        for k, is_large, m, n, total in conn.execute(
            select(block, big, minute, func.count(), func.sum(wait))
            .where(*where)
            .group_by(block, big, minute)
        ):
            w.add(min(span.n_blocks - 1, max(0, int(k))), bool(is_large), n, total / HOUR)
            w.minutes["all"][int(m)] += n
            if is_large:
                w.minutes["large"][int(m)] += n
        out.append(w)
    cut = spans[0].b
    straddling = conn.scalar(
        select(func.count()).where(
            r.cluster == cluster, r.run == 0, r.start_t >= cut, r.start_t < spans[-1].b,
            r.submit_t >= spans[0].a, r.submit_t < cut,
        )
    )  # fmt: skip
    return out, int(straddling or 0), "snapshots (pending-to-running transitions)"


def _waits_with_sacct(
    conn: Connection,
    cluster: str,
    spans: list[_Span],
    sacct: Sequence[AccountedJob],
    large: int,
) -> tuple[list[_Waits], int, str]:
    """As :func:`_waits`, job by job: sacct's times replace the snapshots' for the jobs it
    names, and its GPU jobs the snapshots never saw are added."""
    a, b = spans[0].a, spans[-1].b
    r = JobRun
    rows = conn.execute(
        select(r.job_id, r.submit_t, r.start_t, r.gpus).where(
            r.cluster == cluster, r.run == 0, r.start_t >= a, r.start_t < b,
            r.submit_t.is_not(None),
        )
    ).all()  # fmt: skip
    jobs: dict[str, tuple[float, float, int]] = {
        jid: (float(sub or 0.0), float(st), int(g)) for jid, sub, st, g in rows
    }
    matched = added = 0
    for acc in _first_runs(sacct):
        if acc.start_t is None or not a <= acc.start_t < b:
            continue
        known = jobs.get(acc.job_id)
        if known is not None:
            if acc.start_t > known[1] + 1:
                # a later run: without -D sacct shows a requeued job's last run only
                # (Submit = when it was requeued); the snapshots' first run stays
                continue
            jobs[acc.job_id] = (acc.submit_t, acc.start_t, known[2])
            matched += 1
        elif acc.gpus:
            jobs[acc.job_id] = (acc.submit_t, acc.start_t, acc.gpus)
            added += 1
    out = [_Waits(s.n_blocks) for s in spans]
    straddling = 0
    cut = spans[0].b
    for submit, start, gpus in jobs.values():
        if submit < a or start < submit:
            continue  # before the window; or clock skew, no wait to speak of
        if submit < cut <= start:
            straddling += 1
            continue
        i = 0 if start < cut else 1
        wait_h = (start - submit) / HOUR
        out[i].add(spans[i].block_of(start), gpus >= large, 1, wait_h)
        minute = int((start - submit) // 60)
        out[i].minutes["all"][minute] += 1
        if gpus >= large:
            out[i].minutes["large"][minute] += 1
    waits_from = (
        f"snapshots refined by sacct ({matched} jobs' times replaced, {added} GPU jobs "
        "the snapshots missed added)"
    )
    return out, straddling, waits_from


def _first_runs(sacct: Sequence[AccountedJob]) -> list[AccountedJob]:
    """One record per job, its first run (the earliest start): ``sacct -D`` lists every run
    of a requeued job, and the waits are those of the first (``job_runs.run == 0``)."""
    first: dict[str, AccountedJob] = {}
    for acc in sacct:
        if acc.start_t is None:
            continue
        seen = first.get(acc.job_id)
        if seen is None or (seen.start_t is not None and acc.start_t < seen.start_t):
            first[acc.job_id] = acc
    return list(first.values())


def _floor(conn: Connection, value: Any) -> Any:
    if conn.dialect.name == "postgresql":
        return func.floor(value)
    return cast(value, Integer)  # value >= 0: truncation is the floor


@dataclass
class _Plans:
    statuses: Counter[str] = field(default_factory=Counter)
    modes: Counter[str] = field(default_factory=Counter)
    created: list[tuple[float, str]] = field(default_factory=list)
    """(time, status) of each plan."""
    requeues: list[tuple[float, float]] = field(default_factory=list)
    """(time, GPU-hours lost) of each requeue an enforce plan did."""
    dry_run_requeues: int = 0


def _plans(conn: Connection, cluster: str, span: _Span) -> _Plans:
    out = _Plans()
    a, b = _dt(span.a), _dt(span.b)
    for created, mode, status in conn.execute(
        select(Plan.created_at, Plan.mode, Plan.status).where(
            Plan.cluster == cluster, Plan.created_at >= a, Plan.created_at < b
        )
    ):
        out.statuses[status] += 1
        out.modes[mode] += 1
        out.created.append((created.timestamp(), status))
    lost = PlanStep.args["lost_gpu_hours"].as_float()
    for finished, mode, hours in conn.execute(
        select(PlanStep.finished_at, Plan.mode, lost)
        .join(Plan, Plan.id == PlanStep.plan_id)
        .where(Plan.cluster == cluster, PlanStep.action == "requeue", PlanStep.state == "done",
               PlanStep.finished_at >= a, PlanStep.finished_at < b)
    ):  # fmt: skip
        if mode == "enforce":
            out.requeues.append((finished.timestamp(), float(hours or 0.0)))
        else:
            out.dry_run_requeues += 1
    return out


def _resolution(span_s: float, step: float) -> int:
    want = max(span_s / MAX_POINTS, step)
    return next((r for r in RESOLUTIONS if r >= want), RESOLUTIONS[-1])


def _series(
    conn: Connection, cluster: str, a: float, b: float, resolution: int
) -> list[ImpactPoint]:
    """Cluster figures averaged per bucket over the whole window (for the plot)."""
    g = GroupMetric
    span = _Span("series", 0.0, b, float(resolution))
    bucket = _block_expr(conn, g.t, span)
    names = ("unusable", "unusable_spatial", "unusable_topology", "unusable_configuration",
             "fgd", "falsely_starved_gpus")  # fmt: skip
    acc: dict[float, list[float]] = defaultdict(lambda: [0.0] * (1 + 2 * len(names)))
    for i, n, *values in conn.execute(
        select(bucket, func.count(), *(func.sum(getattr(g, c)) for c in names),
               *(func.count(getattr(g, c)) for c in names))
        .where(g.cluster == cluster, g.scope == "cluster", g.t >= a, g.t <= b)
        .group_by(bucket)
    ):  # fmt: skip
        row = acc[float(i) * resolution]
        row[0] += n
        for j, v in enumerate(values):
            row[1 + j] += float(v or 0.0)
    rolled = conn.scalar(
        select(RollupProgress.rolled_until_t).where(RollupProgress.cluster == cluster)
    )
    if rolled is not None and rolled > a:
        h = GroupMetricHourly
        for hour_t, n, *values in conn.execute(
            select(h.hour_t, h.samples, *(getattr(h, c) for c in names)).where(
                h.cluster == cluster, h.scope == "cluster", h.hour_t >= a,
                h.hour_t < min(b, rolled),
            )
        ):  # fmt: skip
            row = acc[hour_t // resolution * resolution]
            row[0] += n
            for j, v in enumerate(values):
                if v is not None:
                    row[1 + j] += v * n
                    row[1 + len(names) + j] += n
    out = []
    for t, row in sorted(acc.items()):
        n = row[0]
        if not n:
            continue
        means = [row[1 + j] / row[1 + len(names) + j] if row[1 + len(names) + j] else None
                 for j in range(len(names))]  # fmt: skip
        out.append(ImpactPoint(
            t=_dt(t), samples=int(n), unusable=means[0] or 0.0, unusable_spatial=means[1],
            unusable_topology=means[2], unusable_configuration=means[3], fgd=means[4] or 0.0,
            falsely_starved_gpus=means[5],
        ))  # fmt: skip
    return out


def _period(span: _Span, gauges: dict[str, Any], waits: _Waits, plans: _Plans) -> Period:
    snapshots = int(sum(gauges["samples"]))
    hours = (span.b - span.a) / HOUR

    def gauge_mean(name: str) -> float | None:
        n = sum(gauges["counts"][name])
        return sum(gauges["sums"][name]) / n if n else None

    starved = gauge_mean("falsely_starved_gpus")
    return Period(
        name=span.name, start=_dt(span.a), end=_dt(span.b), hours=hours, snapshots=snapshots,
        jobs=waits.jobs("all"), wait_mean_h=waits.mean("all"),
        wait_median_h=waits.quantile("all", 0.5), wait_p90_h=waits.quantile("all", 0.9),
        large_jobs=waits.jobs("large"), large_wait_mean_h=waits.mean("large"),
        large_wait_median_h=waits.quantile("large", 0.5),
        falsely_starved_gpu_hours=None if starved is None else starved * hours,
        unusable=gauge_mean("unusable"), unusable_spatial=gauge_mean("unusable_spatial"),
        unusable_topology=gauge_mean("unusable_topology"),
        unusable_configuration=gauge_mean("unusable_configuration"), fgd=gauge_mean("fgd"),
        plans=dict(sorted(plans.statuses.items())), plan_modes=dict(sorted(plans.modes.items())),
        requeues=len(plans.requeues), gpu_hours_lost=sum(h for _, h in plans.requeues),
        dry_run_requeues=plans.dry_run_requeues,
    )  # fmt: skip


# (key, label, unit, which way is better); how each is made per block: _blocks
_FIGURES: tuple[tuple[str, str, str, str], ...] = (
    ("wait_all", "wait, all jobs", "h", "lower"),
    ("wait_large", "wait, large jobs", "h", "lower"),
    ("falsely_starved", "falsely starved GPU-h/day", "GPU-h/d", "lower"),
    ("unusable", "unusable GPUs", "GPUs", "lower"),
    ("unusable_spatial", "  spatial", "GPUs", "lower"),
    ("unusable_topology", "  topology", "GPUs", "lower"),
    ("unusable_configuration", "  configuration", "GPUs", "lower"),
    ("fgd", "FGD", "GPUs", "lower"),
    ("plans_done", "plans done/day", "/d", ""),
    ("plans_aborted", "plans aborted/day", "/d", ""),
    ("requeues", "requeues/day (enforce)", "/d", "lower"),
    ("gpu_hours_lost", "GPU-h lost/day", "GPU-h/d", "lower"),
)


def _blocks(
    key: str, span: _Span, gauges: dict[str, Any], waits: _Waits, plans: _Plans
) -> tuple[Blocks, float]:
    """The per-block (sums, weights) of one figure, and its scale to the shown unit."""
    n = span.n_blocks
    if key in ("wait_all", "wait_large"):
        c = key.removeprefix("wait_")
        return Blocks(tuple(waits.sums[c]), tuple(waits.counts[c])), 1.0
    if key == "falsely_starved":
        name = "falsely_starved_gpus"
        return Blocks(tuple(gauges["sums"][name]), tuple(gauges["counts"][name])), 24.0
    if key in GAUGES:
        return Blocks(tuple(gauges["sums"][key]), tuple(gauges["counts"][key])), 1.0
    days = span.block_days()
    sums = [0.0] * n
    if key in ("plans_done", "plans_aborted"):
        want = key.removeprefix("plans_")
        for t, status in plans.created:
            if status == want:
                sums[span.block_of(t)] += 1
    else:
        for t, hours in plans.requeues:
            sums[span.block_of(t)] += 1 if key == "requeues" else hours
    return Blocks(tuple(sums), days), 1.0


def _comparisons(
    spans: list[_Span],
    gauges: list[dict[str, Any]],
    waits: list[_Waits],
    plans: list[_Plans],
    large: int,
    resampler: Resampler,
) -> list[Comparison]:
    out = []
    for key, label, unit, better in _FIGURES:
        (before, scale), (after, _) = (
            _blocks(key, s, g, w, p) for s, g, w, p in zip(spans, gauges, waits, plans, strict=True)
        )
        iv: Interval = resampler.compare(before, after).scaled(scale)
        if key == "wait_large":
            label = f"wait, jobs of {large}+ GPUs"
        out.append(Comparison(key, label, unit, better, iv.before, iv.after, iv.difference,
                              iv.low, iv.high))  # fmt: skip
    return out


def _notes(gauges: list[dict[str, Any]], spans: list[_Span]) -> list[str]:
    notes = []
    for g, span in zip(gauges, spans, strict=True):
        samples = sum(g["samples"])
        known = sum(g["counts"]["falsely_starved_gpus"])
        if samples and known < samples:
            notes.append(
                f"{span.name}: {known / samples:.0%} of the snapshots record unusable GPUs by "
                "cause and falsely starved GPUs (stored since schema revision 0003); the "
                "figures are over those"
            )
    return notes
