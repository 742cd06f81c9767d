"""The service's stored snapshots as a site's finished jobs, for ``simulate --workload db:URL``.

The service stores every cycle's snapshot as job *versions* over intervals of snapshots
(:mod:`.snapshots`). Read back in order, a job's versions say when it was first seen
waiting, first seen running and last seen running; this module turns them into the same
:class:`~slurm_defrag.domain.accounting.SiteJob` records ``read_site_jobs`` makes of
``sacct`` output, so the simulator's site workload (``traces/site.py``) replays either
unchanged. The rules (docs/site-workload.md, "The service's database"):

* **cluster**: the one of the newest snapshot; the node inventory is that snapshot's (the
  command's ``-s`` replaces it);
* **submit**: Slurm's SubmitTime of the job (any version), else the first snapshot showing it;
* **start**: Slurm's StartTime of the run kept, else the first snapshot showing it running;
* **end**: halfway between the last snapshot showing it running and the next one, which no
  longer does (finished jobs leave the snapshots), at most its time limit after the start;
* **runs**: a start is a version holding its GPUs after one waiting (a requeue seen), or a
  new StartTime (a requeue between two snapshots); the last run is replayed, the earlier
  ones counted, as for sacct;
* **shape**: GPUs and nodes as held (a job holding none: its request), CPUs and memory per
  node times nodes, the GPU type only when the request named one; user, account,
  partition and QOS as Slurm gave them.

Left out and counted: jobs still waiting or running in the newest snapshot, and jobs that
left the queue never seen running (cancelled, or ran and ended between two snapshots: a
snapshot cannot tell). A job submitted and ended between two snapshots is in none of them;
:attr:`StoredJobs.unseen_ids` bounds how many from the gaps in the job ids.

Opened read-only in spirit: no migration runs, nothing is written; a database at another
schema revision, a missing file or one without snapshots is one :class:`InputError` or
store error, never a traceback. A version whose stored body no longer reads is one line in
:attr:`SiteRead.problems`.
"""

from __future__ import annotations

import statistics
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection, Engine, func, select

from slurm_defrag.domain.accounting import SiteJob, SiteRead
from slurm_defrag.domain.cluster import HOLDS_GPUS, ClusterSnapshot, Job
from slurm_defrag.errors import InputError
from slurm_defrag.store import migrate, snapshots
from slurm_defrag.store.database_errors import SchemaNotCurrent, SchemaTooNew
from slurm_defrag.store.engine import (
    check_reachable,
    display_url,
    make_engine,
    parse_url,
    translate_errors,
)
from slurm_defrag.store.models import JobRef, JobState, Snapshot

MAX_PROBLEMS = 100_000
"""Unreadable versions remembered (each one line); more are counted only."""
STILL_WAITING = "still waiting in the newest snapshot"
STILL_RUNNING = "still running in the newest snapshot"
NEVER_SEEN_RUNNING = "left the queue never seen running (cancelled, or ran within one cycle)"
EARLIER_RUNS = "earlier runs of requeued jobs"
BAD = "bad records"


@dataclass
class StoredJobs:
    """What :func:`read_stored_jobs` made of a database."""

    read: SiteRead
    """The jobs; ``records`` counts the job versions read."""
    newest: ClusterSnapshot | None
    """The newest stored snapshot of :attr:`cluster`, the default node inventory (None:
    not asked for)."""
    url: str
    """The database, password hidden."""
    cluster: str
    snapshots: int
    first_t: float
    last_t: float
    period_s: float
    """The median time between two snapshots: the resolution of every time not Slurm's."""
    jobs_seen: int = 0
    exact_starts: int = 0
    """Jobs kept whose start is Slurm's StartTime (the others: first snapshot seen running)."""
    unseen_ids: int = 0
    """Plain job ids between the lowest and highest seen that no snapshot showed: at most
    this many jobs were submitted and ended between two snapshots (other clusters of a
    federation and array tasks leave gaps too)."""
    other_clusters: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """A short name for a title: the SQLite file's or the PostgreSQL database's."""
        database = parse_url(self.url).database or self.url
        return Path(database).name or database


def read_stored_jobs(url: str, *, inventory: bool = True) -> StoredJobs:
    """The finished jobs the stored snapshots of ``url`` show (module docstring), and the
    newest snapshot if ``inventory``.

    Raises
    ------
    InputError
        The SQLite file does not exist, or the database holds no snapshot.
    DatabaseUrlError, DatabaseUnreachable, SchemaNotCurrent, SchemaTooNew
        As for any command that opens the database; the schema ones name this command.
    """
    engine = _open(url)
    try:
        with translate_errors(engine.url), engine.connect() as conn:
            return _read(conn, display_url(engine.url), inventory)
    finally:
        engine.dispose()


def _open(url: str) -> Engine:
    """The engine of ``url``, reachable and at this code's schema; nothing is created."""
    parsed = parse_url(url)
    shown = display_url(parsed)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        assert parsed.database is not None
        path = Path(parsed.database).expanduser()
        # make_engine would create a missing file: a typo must not become an empty database
        if not parsed.database.startswith("file:") and not path.is_file():
            raise InputError(
                f"--workload db:{shown}: no such database file {path} "
                "(the service's default is in `slurm-defrag db current`)"
            )
    engine = make_engine(url)
    try:
        check_reachable(engine)
        migrate.check(engine)
    except SchemaTooNew as exc:
        engine.dispose()
        raise SchemaTooNew(f"--workload db: {exc}") from None
    except SchemaNotCurrent:
        engine.dispose()
        rev = migrate.current(engine)
        if rev is None:
            raise InputError(
                f"--workload db:{shown}: not a slurm-defrag database (no schema revision): "
                "nothing to replay"
            ) from None
        raise SchemaNotCurrent(
            f"--workload db:{shown}: the database is at schema revision {rev}, this "
            f"slurm-defrag reads {migrate.head()}: upgrade a copy of it "
            f"(`slurm-defrag db upgrade --db URL-OF-THE-COPY`) and replay that, or run the "
            "slurm-defrag that wrote it"
        ) from None
    except BaseException:
        engine.dispose()
        raise
    return engine


def _read(conn: Connection, shown: str, inventory: bool) -> StoredJobs:
    newest_id = snapshots.latest_id(conn)
    if newest_id is None:
        raise InputError(
            f"--workload db:{shown}: the database holds no snapshot: nothing to replay"
        )
    cluster = conn.execute(select(Snapshot.cluster).where(Snapshot.id == newest_id)).scalar_one()
    newest = None
    if inventory:
        try:
            newest = snapshots.load(conn, newest_id)
        except ValidationError as exc:
            raise InputError(
                f"--workload db:{shown}: the newest snapshot (id {newest_id}) does not read "
                f"({one_line(str(exc.errors()[0]['msg']))}): give the nodes with -s FILE"
            ) from None
    others = sorted(
        c for c in conn.execute(select(Snapshot.cluster).distinct()).scalars() if c != cluster
    )
    times = conn.execute(
        select(Snapshot.id, Snapshot.t).where(Snapshot.cluster == cluster).order_by(Snapshot.id)
    ).all()
    clock = _Clock([int(i) for i, _ in times], [float(t) for _, t in times])
    rows = conn.execute(
        select(
            JobRef.id,
            JobRef.job_id,
            JobRef.user,
            JobRef.account,
            JobState.id,
            JobState.from_snapshot,
            JobState.to_snapshot,
            JobState.body,
        )
        .join(JobRef, JobRef.id == JobState.job_ref)
        .where(JobRef.cluster == cluster)
        .order_by(JobRef.id, JobState.from_snapshot, JobState.id),
        # streamed (a server-side cursor on PostgreSQL): a week of versions need not fit
        execution_options={"yield_per": 2000},
    )
    out = _Collector(shown, clock)
    group: list[Any] = []
    for row in rows:
        if group and group[0][0] != row[0]:
            out.job(group)
            group = []
        group.append(row)
    if group:
        out.job(group)
    read = out.done()
    n_seen = conn.execute(
        select(func.count()).select_from(JobRef).where(JobRef.cluster == cluster)
    ).scalar_one()
    return StoredJobs(
        read=read,
        newest=newest,
        url=shown,
        cluster=cluster,
        snapshots=len(clock.ids),
        first_t=clock.times[0],
        last_t=clock.times[-1],
        period_s=clock.period_s,
        jobs_seen=int(n_seen),
        exact_starts=out.exact_starts,
        unseen_ids=unseen_ids(out.ids_seen),
        other_clusters=others,
    )


class _Clock:
    """The cluster's snapshots in order: which of them an interval of ids covers."""

    def __init__(self, ids: list[int], times: list[float]) -> None:
        self.ids = ids
        self.times = times
        gaps = [b - a for a, b in pairwise(times)]
        self.period_s = statistics.median(gaps) if gaps else 0.0

    def span(self, from_id: int, to_id: int | None) -> tuple[int, int]:
        """Indexes [lo, hi) of the stored snapshots a version was valid in."""
        lo = bisect_left(self.ids, from_id)
        hi = len(self.ids) if to_id is None else bisect_left(self.ids, to_id)
        return lo, hi


@dataclass
class _Run:
    """One start of a job, as the snapshots saw it."""

    seen_t: float
    """The first snapshot showing it running."""
    slurm_start: float | None
    last_t: float
    """The last snapshot showing it running."""
    gone_t: float | None
    """The first snapshot no longer showing it running; None: still in the newest."""
    job: Job


class _Collector:
    """Jobs, one list of versions at a time -> :class:`SiteRead`."""

    def __init__(self, where: str, clock: _Clock) -> None:
        self.where = where
        self.clock = clock
        self.jobs: list[SiteJob] = []
        self.problems: list[str] = []
        self.skipped: dict[str, int] = {}
        self.records = 0
        self.exact_starts = 0
        self.ids_seen: list[str] = []

    def skip(self, reason: str, n: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + n

    def bad(self, what: str, problem: str) -> None:
        """One line for an odd row; ``what`` names the row and job."""
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(one_line(f"{self.where}: {what}: {problem}"))

    def job(self, rows: Sequence[Any]) -> None:
        """One job: its versions in order (job ref, id, user, account, version id, from,
        to, body)."""
        job_id = str(rows[0][1])
        self.ids_seen.append(job_id)
        self.records += len(rows)
        versions: list[tuple[Job, int, int]] = []
        for _ref, _jid, _user, _account, version, from_id, to_id, body in rows:
            lo, hi = self.clock.span(int(from_id), None if to_id is None else int(to_id))
            if lo >= hi:
                continue  # valid only in snapshots retention deleted
            try:
                parsed = Job.model_validate_json(body)
            except ValidationError as exc:
                err = exc.errors()[0]
                place = ".".join(str(p) for p in err["loc"]) or "body"
                self.bad(f"job_states row {version} (job {job_id})", f"{place}: {err['msg']}")
                self.skip(BAD)
                return
            except ValueError as exc:  # pragma: no cover - pydantic wraps JSON errors
                self.bad(f"job_states row {version} (job {job_id})", f"body: {exc}")
                self.skip(BAD)
                return
            versions.append((parsed, lo, hi))
        if versions:
            self._finish(job_id, versions)

    def _runs(self, versions: list[tuple[Job, int, int]]) -> tuple[list[_Run], list[float]]:
        """The job's runs (a new one at each new StartTime or after waiting again) and
        every SubmitTime its versions gave."""
        t = self.clock.times
        runs: list[_Run] = []
        current: _Run | None = None
        submits: list[float] = []
        for job, lo, hi in versions:
            if job.submit_time is not None:
                submits.append(_epoch(job.submit_time))
            gone = t[hi] if hi < len(t) else None
            if job.state not in HOLDS_GPUS:
                current = None
                continue
            start = None if job.start_time is None else _epoch(job.start_time)
            same = current is not None and (
                start is None or current.slurm_start is None or start == current.slurm_start
            )
            if current is not None and same:
                current.last_t, current.gone_t, current.job = t[hi - 1], gone, job
            else:
                current = _Run(t[lo], start, t[hi - 1], gone, job)
                runs.append(current)
        return runs, submits

    def _times(
        self, what: str, run: _Run, submits: list[float], first_t: float
    ) -> tuple[float, float]:
        """(submit, start) of ``run``: Slurm's times where they agree with the snapshots,
        else the snapshots' (one line each where they do not)."""
        start = run.seen_t
        if run.slurm_start is not None:
            if run.slurm_start > run.seen_t:
                self.bad(
                    what,
                    f"StartTime {_iso(run.slurm_start)} is after the snapshot of "
                    f"{_iso(run.seen_t)} that shows it running (clocks apart?): the "
                    "snapshot's time is used",
                )
            else:
                start = run.slurm_start
                self.exact_starts += 1
        submit = min(submits) if submits else first_t
        if submit > start:
            self.bad(
                what,
                f"SubmitTime {_iso(submit)} is after its start {_iso(start)}: the start is used",
            )
            submit = start
        return submit, start

    def _finish(self, job_id: str, versions: list[tuple[Job, int, int]]) -> None:
        t = self.clock.times
        runs, submits = self._runs(versions)
        first_t = t[versions[0][1]]
        last_gone = versions[-1][2]
        if not runs:
            self.skip(STILL_WAITING if last_gone >= len(t) else NEVER_SEEN_RUNNING)
            return
        run = runs[-1]
        if run.gone_t is None:
            self.skip(STILL_RUNNING)
            return
        if len(runs) > 1:
            self.skip(EARLIER_RUNS, len(runs) - 1)
        submit, start = self._times(f"job {job_id}", run, submits, first_t)
        job = run.job
        limit = job.time_limit_s
        end = (run.last_t + run.gone_t) / 2
        run_s = max(end - start, 0.0)
        if limit is not None:
            run_s = min(run_s, float(limit))
        request = job.request or next(
            (v.request for v, _, _ in reversed(versions) if v.request is not None), None
        )
        if job.gpus:
            nodes, gpus = len(job.gpus), job.gpu_count
        elif request is not None:
            nodes, gpus = request.nodes, request.gpus
        else:
            nodes, gpus = 1, 0
        self.jobs.append(
            SiteJob(
                job_id=job_id,
                submit_t=submit,
                start_t=start,
                run_s=run_s,
                time_limit_s=None if limit is None else float(limit),
                nodes=nodes,
                cpus=job.cpus_per_node * nodes,
                memory_mb=job.memory_mb_per_node * nodes,
                gpus=gpus,
                gpu_model=request.gpu_model if request is not None else None,
                user=job.user,
                account=job.account,
                partition=job.partition,
                qos=job.qos,
                state="ENDED",
                runs=len(runs),
            )
        )

    def done(self) -> SiteRead:
        self.jobs.sort(key=lambda j: (j.submit_t, j.job_id))
        return SiteRead(self.jobs, self.problems, self.skipped, self.records)


def unseen_ids(ids: Iterable[str]) -> int:
    """Plain job ids between the lowest and highest of ``ids`` that are not among them
    (an array task ``123_4`` and a het component ``123+1`` count as ``123``)."""
    numbers = set()
    for job_id in ids:
        base = job_id.split("_", 1)[0].split("+", 1)[0]
        if base.isascii() and base.isdigit():
            numbers.add(int(base))
    if not numbers:
        return 0
    return max(numbers) - min(numbers) + 1 - len(numbers)


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters escaped (a stored body is
    what Slurm printed: any text)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _epoch(dt: datetime) -> float:
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
