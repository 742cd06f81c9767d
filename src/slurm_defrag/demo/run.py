"""The demo's clock: the service cycle and the simulated cluster in lockstep.

Cycle ``k`` runs at simulated time ``k x interval`` (the service's 60 s), on a cluster
advanced exactly that far; between two cycles the cluster runs the simulated minute
(jobs end, arrive, start) and the driver waits until the wall clock catches up with
``speed``. A cycle that takes longer than its share of wall time slows the simulation
down rather than skipping time, so a run depends only on the seed and the simulated
span, never on how fast the machine is: the same seed gives the same plans.

The cycle is the service's own (:class:`~slurm_defrag.service.loop.Cycle`, built by the
composition root as ``serve`` builds it); the driver only calls :meth:`Cycle.run` where
``serve``'s scheduler would, and reads the database and the cluster to tell what
happened. After the span it keeps cycling, without new plans being made, until the plans
in flight are done or rolled back, then restores what packing changed
(:meth:`Cycle.shutdown`): the simulated Slurm is left as a site would find it after
``serve`` stopped.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from slurm_defrag.domain.cluster import JobState
from slurm_defrag.domain.plan import Plan
from slurm_defrag.metrics.compute import compute
from slurm_defrag.metrics.report import FragReport
from slurm_defrag.service.loop import Cycle
from slurm_defrag.sim.live import LiveCluster
from slurm_defrag.store.plans import PlanRecord

OPEN = ("open", "applying")
SAMPLE_EVERY = 5
"""Cycles between two samples of the fragmentation figures (both runs sample alike)."""


@dataclass(frozen=True)
class Pace:
    speed: float
    """Simulated seconds per wall second."""
    span_s: float
    """Simulated time the demo covers."""
    interval_s: float = 60.0
    """Simulated seconds between cycles: the service's default interval."""

    @property
    def cycles(self) -> int:
        return max(1, round(self.span_s / self.interval_s))


@dataclass(frozen=True)
class Figures:
    """The fragmentation figures the summary compares."""

    free: int
    unusable: int
    falsely_starved: int
    fgd: float

    @classmethod
    def of(cls, report: FragReport) -> Figures:
        c = report.cluster_metrics.counts
        return cls(c.free, c.unusable.total, len(report.falsely_starved), c.fgd)


@dataclass(frozen=True)
class Helped:
    job_id: str
    gpus: int
    wait_s: float


@dataclass
class Outcome:
    """What a run did, read from the cluster (and, for plans, from the database)."""

    cycles: int = 0
    sim_s: float = 0.0
    wall_s: float = 0.0
    first_done_wall_s: float | None = None
    """Wall seconds from the start of the demo to the first plan done."""
    first_done_sim_s: float | None = None
    plans: dict[str, int] = field(default_factory=dict)
    """Final status -> plans (packing's record left out)."""
    snapshots: int = 0
    helped: list[Helped] = field(default_factory=list)
    requeues: int = 0
    lost_gpu_h: float = 0.0
    before: Figures | None = None
    after: Figures | None = None
    samples: list[Figures] = field(default_factory=list)
    large_wait_s: float | None = None
    large_jobs: int = 0
    stray: list[str] = field(default_factory=list)
    """What a plan left in the simulated Slurm after the demo (should be nothing)."""


class Driver:
    """Runs ``cycle`` on ``cluster`` at ``pace``; ``say`` prints a progress line."""

    def __init__(
        self,
        cycle: Cycle,
        cluster: LiveCluster,
        pace: Pace,
        *,
        say: Callable[[str], None] = lambda _: None,
        stop: threading.Event | None = None,
        started: float | None = None,
        large_gpus: int = 4,
    ) -> None:
        self.cycle = cycle
        self.cluster = cluster
        self.pace = pace
        self.say = say
        self.stop = stop or threading.Event()
        self.started = time.monotonic() if started is None else started
        """``time.monotonic()`` when the demo started (the first-plan time counts from it)."""
        self.large_gpus = large_gpus
        self.out = Outcome()
        self._seen: dict[int, str] = {}

    def run(self) -> Outcome:
        out, cluster, pace = self.out, self.cluster, self.pace
        cluster.advance(0.0)
        out.before = Figures.of(compute(cluster.snapshot()))
        wall0 = time.monotonic()
        for k in range(pace.cycles):
            if self.stop.is_set():
                break
            self._cycle()
            if k % SAMPLE_EVERY == 0:
                out.samples.append(Figures.of(compute(cluster.snapshot())))
            # wait for the wall clock, then let the simulated minute happen
            due = wall0 + (k + 1) * pace.interval_s / pace.speed
            self.stop.wait(max(0.0, due - time.monotonic()))
            cluster.advance((k + 1) * pace.interval_s)
        self._finish_in_flight()
        self.cycle.shutdown()
        out.after = Figures.of(compute(cluster.snapshot()))
        out.wall_s = time.monotonic() - self.started
        out.sim_s = cluster.now
        self._tally()
        return out

    def _cycle(self) -> None:
        report = self.cycle.run()
        self.out.cycles += 1
        if report.snapshot_id is not None:
            self.out.snapshots += 1
        for pid, status in sorted(report.plans.items()):
            self._plan_changed(pid, status)
        # refused at admission: stored closed, never in the report
        for rec in self.cycle.repo.plans.recent(limit=5):
            if rec.id not in self._seen and rec.status == "aborted" and "plan" in rec.inputs:
                self._plan_changed(rec.id, rec.status)

    def _plan_changed(self, pid: int, status: str) -> None:
        before = self._seen.get(pid)
        if before == status:
            return
        self._seen[pid] = status
        rec = self.cycle.repo.plans.get(pid)
        when = self._when()
        if before is None and status in OPEN:
            plan = Plan.model_validate(rec.inputs["plan"])
            self.say(f"{when}  plan #{pid} admitted: {admitted(plan)}")
        elif status not in OPEN:
            self.say(f"{when}  plan #{pid} {status}: {rec.note}")
        if status == "done" and self.out.first_done_wall_s is None:
            self.out.first_done_wall_s = time.monotonic() - self.started
            self.out.first_done_sim_s = self.cluster.now

    def _when(self) -> str:
        wall = time.monotonic() - self.started
        return f"[{wall:5.1f} s | simulated {hhmm(self.cluster.now)}]"

    def _finish_in_flight(self) -> None:
        """Cycle on until no plan is in flight (a cycle that advances plans makes none),
        at most for the plans' TTL and a little more."""
        limit = int(self.cycle.ttl_s // self.pace.interval_s) + 3
        for _ in range(limit):
            if not self.cycle.executor.open_plans():
                return
            self.cluster.advance(self.cluster.now + self.pace.interval_s)
            self._cycle()

    def _tally(self) -> None:
        out, cluster = self.out, self.cluster
        for rec in self.cycle.repo.plans.recent(limit=100_000):
            if "plan" in rec.inputs:  # not the packing record
                out.plans[rec.status] = out.plans.get(rec.status, 0) + 1
        out.requeues, out.lost_gpu_h = cluster.stats.requeues, cluster.stats.lost_gpu_h
        for job in sorted(cluster.jobs.values(), key=lambda j: j.first_start or 0.0):
            if job.started_in.startswith("defrag-") and job.first_start is not None:
                out.helped.append(
                    Helped(job.id, job.spec.num_gpu, job.first_start - job.spec.submit)
                )
        out.large_wait_s, out.large_jobs = large_wait(cluster, self.large_gpus)
        out.stray = stray(cluster, self.cycle.repo.plans.recent(open_only=True, limit=1000))


def admitted(plan: Plan) -> str:
    """One line: which job starts where, and what it costs."""
    parts = []
    for t in plan.served:
        where = " + ".join(f"{p.node} GPUs {','.join(map(str, p.gpus))}" for p in t.placements)
        victims = sorted({v for p in t.placements for v in p.victims}, key=_id_order)
        if victims:
            how = f"requeueing {', '.join(victims)}"
        elif t.mode == "drain":
            how = "holding the block until its jobs end"
        else:
            how = "on free GPUs"
        parts.append(f"job {t.job_id} ({t.request}) on {where}, {how}")
    lost = sum(v.lost_gpu_hours for v in plan.victims)
    return "; ".join(parts) + (f" ({lost:.2f} GPU-hours of work lost)" if plan.victims else "")


def _id_order(job_id: str) -> tuple[int, str]:
    return (int(job_id), "") if job_id.isdigit() else (1 << 62, job_id)


def large_wait(cluster: LiveCluster, gpus: int) -> tuple[float | None, int]:
    """Mean wait of the jobs of ``gpus`` GPUs or more that were waiting at the start or
    came since (until their first start, or until now for those still waiting), and how
    many there are."""
    waits = [
        (j.first_start if j.first_start is not None else cluster.now) - j.spec.submit
        for j in cluster.jobs.values()
        if j.spec.num_gpu >= gpus
        and j.spec.submit <= cluster.now
        and (j.first_start is None or j.first_start >= 0)
    ]
    return (statistics.fmean(waits) if waits else None), len(waits)


def stray(cluster: LiveCluster, open_plans: list[PlanRecord]) -> list[str]:
    """What slurm-defrag left behind: reservations, drains, changed weights, jobs still
    attached to a reservation, plans still open."""
    out = [f"reservation {name}" for name in cluster.reservations]
    for n, admin in enumerate(cluster.admin):
        name = cluster.state.nodes[n].name
        if admin.drained or "slurm-defrag" in admin.reason:
            out.append(f"node {name} drained ({admin.reason})")
        if int(cluster.state.weight[n]) != cluster.state.nodes[n].weight:
            out.append(f"node {name} Weight={int(cluster.state.weight[n])}")
    out += [
        f"job {j.id} in reservation {j.reservation}"
        for j in cluster.jobs.values()
        if j.reservation and j.state in (JobState.PENDING, JobState.RUNNING)
    ]
    out += [f"plan #{p.id} still {p.status}" for p in open_plans]
    return out


def baseline(cluster: LiveCluster, pace: Pace, until: float) -> tuple[list[Figures], LiveCluster]:
    """The same cluster and jobs without the service, sampled like the demo's run."""
    samples = []
    for k in range(pace.cycles):
        t = k * pace.interval_s
        if t > until:
            break
        cluster.advance(t)
        if k % SAMPLE_EVERY == 0:
            samples.append(Figures.of(compute(cluster.snapshot())))
    cluster.advance(until)
    return samples, cluster


def hhmm(seconds: float) -> str:
    m = int(seconds // 60)
    return f"{m // 60:02d}:{m % 60:02d}"


def epoch_for(now: datetime, span_s: float) -> datetime:
    """Simulated time 0 such that a run of ``span_s`` lies in the past, ending about now:
    the history views look back from the wall clock, and a snapshot from the future would
    be out of their window."""
    start = now - timedelta(seconds=span_s)
    return start.replace(second=0, microsecond=0)


def summary(
    out: Outcome, alone: list[Figures], alone_wait: tuple[float | None, int], large_gpus: int
) -> list[str]:
    """The lines printed at the end; ``alone*``: the same jobs without the service."""

    def hours(s: float | None) -> str:
        return "-" if s is None else f"{s / 3600:.2f} h"

    def starved(samples: list[Figures]) -> str:
        return f"{statistics.fmean(f.falsely_starved for f in samples):.1f}" if samples else "-"

    first = (
        f"{out.first_done_wall_s:.1f} s after the start (simulated {hhmm(out.first_done_sim_s)})"
        if out.first_done_wall_s is not None and out.first_done_sim_s is not None
        else "none"
    )
    helped = ", ".join(f"{h.job_id} ({h.gpus} GPUs)" for h in out.helped[:8])
    helped += ", ..." if len(out.helped) > 8 else ""
    b, a = out.before, out.after
    lines = [
        f"summary: {hhmm(out.sim_s)} simulated in {out.wall_s:.0f} s, {out.cycles} service "
        f"cycles, {out.snapshots} snapshots stored",
        f"  first plan applied  {first}",
        "  plans               "
        + (", ".join(f"{n} {s}" for s, n in sorted(out.plans.items())) or "none"),
        f"  jobs helped         {len(out.helped)} started on a block a plan freed"
        + (f": {helped}" if helped else ""),
        f"  requeues            {out.requeues}, {out.lost_gpu_h:.1f} GPU-hours of work lost",
        f"  large jobs' wait    {hours(out.large_wait_s)} on average, {out.large_jobs} jobs of "
        f"{large_gpus}+ GPUs (the same jobs without the service: {hours(alone_wait[0])})",
    ]
    if b is not None and a is not None:
        lines += [
            f"  fragmentation       free GPUs unusable {b.unusable} of {b.free} -> {a.unusable} "
            f"of {a.free}, jobs falsely starved {b.falsely_starved} -> {a.falsely_starved} "
            "(start -> end)",
            f"                      jobs falsely starved on average {starved(out.samples)} "
            f"(the same jobs without the service: {starved(alone)})",
        ]
    lines.append(
        "  left behind         "
        + (
            "; ".join(out.stray)
            if out.stray
            else "nothing (no reservation, drain, Weight or open plan)"
        )
    )
    return lines
