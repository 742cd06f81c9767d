"""Prometheus ``/metrics`` of the service (docs/observability.md lists every series).

Two kinds of series:

* the fragmentation gauges of the cycle's latest snapshot, per partition and GPU model,
  produced by :class:`SnapshotCollector` from figures computed once per cycle, so one
  scrape never mixes two snapshots;
* counters and histograms of what the service did (cycles, plans, victims, Slurm errors),
  fed by the cycle and the executor through the :class:`~.observer.Observer` methods.

Each :class:`Exporter` has its own :class:`CollectorRegistry` (never the global default),
so two services in one process, or one test after another, do not collide.

Labels are bounded by the cluster's configuration: ``partition``, ``gpu_model``,
``dimension``/``reason`` (3 values), ``mode`` (2), ``outcome``, ``kind``, topology ``source``
(6), the unreadable record's ``reason`` (the 9 parts of ``RecordPart``); never a job, user
or node. Units are base units (seconds; GPU-hours lost are exported
as GPU-seconds).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client import Gauge as GaugeSeries
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector
from sqlalchemy.exc import SQLAlchemyError

from slurm_defrag.actuator.events import PlanOutcome
from slurm_defrag.domain.cluster import RecordPart
from slurm_defrag.domain.plan import Plan
from slurm_defrag.metrics.node import add_counts
from slurm_defrag.metrics.report import FragCounts, FragReport
from slurm_defrag.policy.limits import PreemptionHistory
from slurm_defrag.service.http import Query, Response
from slurm_defrag.service.loop import CycleReport
from slurm_defrag.service.observer import SlurmErrorKind
from slurm_defrag.service.runner import Service

log = logging.getLogger(__name__)

PREFIX = "slurm_defrag_"
NO_MODEL = "?"
"""``gpu_model`` of nodes whose GRES names no model (as in ``frag``'s per-model table)."""
ANY_MODEL = "any"
"""``gpu_model`` of pending jobs that accept any model."""
DIMENSIONS = ("spatial", "topology", "configuration")
CYCLE_OUTCOMES = ("read-only", "slurm-unavailable", "off", "idle", "unchanged", "advanced",
                  "planned", "error")  # fmt: skip
PLAN_OUTCOMES: tuple[PlanOutcome, ...] = ("done", "refused", "rolled-back", "failed")
SLURM_ERROR_KINDS: tuple[SlurmErrorKind, ...] = ("unavailable", "rejected", "parse")
MODES = ("dry-run", "enforce")

STARVED_GAP_S = 600.0
"""``falsely_starved_gpu_seconds_total``: a snapshot's figure counts until the next one, at
most this long (a service stopped for an hour did not watch those jobs starve)."""

# Cycles take seconds (a few Slurm commands, one solve); the solver is capped by
# max_time_in_seconds (default 30 s). Buckets cover 10 ms .. 5 min.
_SECONDS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


@dataclass(frozen=True)
class GroupFigures:
    """What the gauges show for one (partition, GPU model)."""

    counts: FragCounts
    largest_free_block: int


def by_partition_and_model(report: FragReport) -> dict[tuple[str, str], GroupFigures]:
    """Node figures summed per (partition, GPU model); a node in two partitions counts in
    both, as in ``frag``'s per-partition table."""
    members: dict[tuple[str, str], list[tuple[FragCounts, int]]] = defaultdict(list)
    largest: dict[tuple[str, str], int] = defaultdict(int)
    for node in report.nodes:
        for partition in node.partitions:
            key = (partition, node.gpu_model or NO_MODEL)
            members[key].append((node.counts, 1))
            largest[key] = max(largest[key], node.largest_free_block)
    return {k: GroupFigures(add_counts(m), largest[k]) for k, m in sorted(members.items())}


def snapshot_families(report: FragReport) -> list[Metric]:
    """The fragmentation gauges of one snapshot."""
    labels = ["partition", "gpu_model"]

    def gauge(name: str, doc: str, extra: Iterable[str] = ()) -> GaugeMetricFamily:
        return GaugeMetricFamily(PREFIX + name, doc, labels=[*labels, *extra])

    gpus = gauge("gpus", "GPUs on the nodes of the partition and model.")
    free = gauge("free_gpus", "GPUs held by no job (on any node, available or not).")
    unavailable = gauge(
        "free_unavailable_gpus",
        "Free GPUs on nodes that take no new work (drained, down, reserved).",
    )
    unusable = gauge(
        "unusable_gpus",
        "Free GPUs on available nodes that no job of the workload mix can use "
        "now, by dimension (spatial, topology, configuration).",
        ["dimension"],
    )
    block = gauge(
        "largest_free_nvlink_block_gpus",
        "Size of the largest free NVLink block on an available node.",
    )
    fgd = gauge(
        "fgd_gpus",
        "FGD: expected free GPUs unusable by a job drawn from the "
        "workload mix (Weng et al., ATC'23), summed over nodes.",
    )
    for (partition, model), g in by_partition_and_model(report).items():
        key = [partition, model]
        c = g.counts
        gpus.add_metric(key, c.gpus)
        free.add_metric(key, c.free)
        unavailable.add_metric(key, c.free_unavailable)
        for dim in DIMENSIONS:
            unusable.add_metric([*key, dim], getattr(c.unusable, dim))
        block.add_metric(key, g.largest_free_block)
        fgd.add_metric(key, c.fgd)

    starved = gauge(
        "falsely_starved_jobs",
        "Pending GPU jobs that would start if the free "
        "GPUs were not fragmented, by reason; gpu_model is the one requested.",
        ["reason"],
    )
    counts: dict[tuple[str, str, str], int] = defaultdict(int)
    for job in report.falsely_starved:
        counts[(job.partition, job.gpu_model or ANY_MODEL, job.reason or "unknown")] += 1
    for key3, n in sorted(counts.items()):
        starved.add_metric(list(key3), n)

    taken = GaugeMetricFamily(
        PREFIX + "snapshot_timestamp_seconds",
        "When the snapshot these gauges describe was read (Unix time).",
        value=report.taken_at.timestamp(),
    )
    unknown = GaugeMetricFamily(
        PREFIX + "nodes_topology_unknown",
        "GPU nodes whose NVLink topology no source gave (shown as unknown, modelled "
        "without NVLink): set gres_conf, topology_map or topology_dir.",
        value=len(report.topology_unknown),
    )
    by_source = GaugeMetricFamily(
        PREFIX + "nodes_topology_source",
        "GPU nodes by where their NVLink topology came from (gres.conf, map, collector, "
        "template; snapshot = stated by a snapshot file; unknown).",
        labels=["source"],
    )
    for source, n in sorted(report.topology_sources.items()):
        by_source.add_metric([source], n)
    return [gpus, free, unavailable, unusable, block, fgd, starved, taken, unknown, by_source]


class SnapshotCollector(Collector):
    """Yields the gauges of the latest snapshot; swapped whole, so a scrape sees one."""

    def __init__(self) -> None:
        self._families: list[Metric] = []

    def update(self, report: FragReport | None) -> None:
        self._families = [] if report is None else snapshot_families(report)

    def collect(self) -> Iterator[Metric]:
        yield from self._families

    def describe(self) -> Iterator[Metric]:
        return iter(())  # names vary with the snapshot; nothing to check at registration


class ServiceCollector(Collector):
    """Whether this instance runs, acts (holds the lease) and in which mode; read per scrape."""

    def __init__(self, service: Service) -> None:
        self.service = service

    def collect(self) -> Iterator[Metric]:
        # Nothing here reads the database: a scrape must answer while it is down.
        s = self.service
        yield GaugeMetricFamily(
            PREFIX + "up", "1 while cycles run on time (as /healthz).", value=int(s.healthy())
        )
        yield GaugeMetricFamily(
            PREFIX + "lease_held",
            "1 if this instance holds the leader lease: the one that reads, stores and acts.",
            value=int(s.lease.held),
        )
        yield GaugeMetricFamily(
            PREFIX + "kill_switch_engaged",
            "1 while the kill switch file exists (no action).",
            value=int(s.kill_switch() is not None),
        )
        mode = GaugeMetricFamily(
            PREFIX + "mode", "The configured mode: 1 for the current one.", labels=["mode"]
        )
        for m in ("off", *MODES):
            mode.add_metric([m], int(m == s.settings.mode))
        yield mode

    def describe(self) -> Iterator[Metric]:
        return iter(())


def build_info() -> dict[str, str]:
    """Labels of ``slurm_defrag_build_info``: what to quote in a bug report."""
    from importlib.metadata import PackageNotFoundError, version

    from slurm_defrag import __version__

    def of(dist: str) -> str:
        try:
            return version(dist)
        except PackageNotFoundError:
            return "none"

    return {
        "version": __version__,
        "ortools": of("ortools"),
        "sqlalchemy": of("sqlalchemy"),
        "pyslurm": of("pyslurm"),
    }


class Exporter:
    """The service's metrics: an :class:`~.observer.Observer` and the ``/metrics`` page.

    ``history`` gives the requeues of the last hour (the same count the limits use, so the
    cycle's own history is passed in); it is read once per cycle that held the lease, not
    per scrape.
    """

    def __init__(self, history: PreemptionHistory) -> None:
        self.history = history
        self.registry = CollectorRegistry()
        self.snapshot = SnapshotCollector()
        self.registry.register(self.snapshot)
        r = self.registry
        # The standard process_* (CPU, memory, open fds, start time) and python_info series,
        # on this registry: a per-service registry does not get the global default's.
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        Info(
            PREFIX.rstrip("_") + "_build",
            "Version of slurm-defrag and of the libraries that decide plans.",
            registry=r,
        ).info(build_info())
        self.cycle_seconds = Histogram(
            PREFIX + "cycle_duration_seconds",
            "Duration of one service cycle.",
            buckets=_SECONDS,
            registry=r,
        )
        self.cycles = Counter(
            PREFIX + "cycles_total", "Cycles by outcome.", ["outcome"], registry=r
        )
        self.last_cycle = GaugeSeries(
            PREFIX + "last_cycle_timestamp_seconds",
            "When the last cycle ended (Unix time).",
            registry=r,
        )
        self.solve_seconds = Histogram(
            PREFIX + "solve_duration_seconds",
            "CP-SAT time of one planning solve (cycles where the planner had something to decide).",
            buckets=_SECONDS,
            registry=r,
        )
        self.plans = Counter(
            PREFIX + "plans_total",
            "Plans ended, by mode and outcome.",
            ["mode", "outcome"],
            registry=r,
        )
        self.victims = Counter(
            PREFIX + "victims_requeued_total",
            "Victim jobs requeued by plans (dry-run: in the sandbox only).",
            ["mode"],
            registry=r,
        )
        self.lost = Counter(
            PREFIX + "victim_gpu_seconds_lost_total",
            "GPU-seconds of work the requeued victims had done (GPUs x runtime so far).",
            ["mode"],
            registry=r,
        )
        self.slurm_errors = Counter(
            PREFIX + "slurm_errors_total", "Failed Slurm calls by kind.", ["kind"], registry=r
        )
        self.unreadable = Counter(
            PREFIX + "unreadable_jobs_total",
            "Job records a Slurm read could not understand whole, by the part that did not "
            "read (counted per read: a job that stays unreadable counts every cycle). Such a "
            "job is out of planning; the service log names it.",
            ["reason"],
            registry=r,
        )
        self.starved = Counter(
            PREFIX + "falsely_starved_gpu_seconds",
            "GPU-seconds falsely starved jobs waited: the GPUs they ask for, held from one "
            "snapshot to the next (at most 10 minutes).",
            registry=r,
        )
        self._starved_at: tuple[datetime, int] | None = None
        """(when, GPUs falsely starved jobs asked for) of the previous snapshot measured."""
        self.preemptions = GaugeSeries(
            PREFIX + "preemptions_last_hour",
            "Jobs requeued by enforce plans in the last hour, from the database (all instances).",
            registry=r,
        )
        # Every label value known up front exists from the start at 0, so rate() and
        # increase() see the first event instead of a series appearing at 1.
        for outcome in CYCLE_OUTCOMES:
            self.cycles.labels(outcome)
        for m in MODES:
            for p in PLAN_OUTCOMES:
                self.plans.labels(m, p)
            self.victims.labels(m)
            self.lost.labels(m)
        for kind in SLURM_ERROR_KINDS:
            self.slurm_errors.labels(kind)
        for part in RecordPart:
            self.unreadable.labels(part.value)

    def watch(self, service: Service) -> None:
        """Add the gauges read from the running service (up, lease, mode)."""
        self.registry.register(ServiceCollector(service))

    def page(self, _query: Query) -> Response:
        return Response(200, generate_latest(self.registry), CONTENT_TYPE_LATEST)

    # -- Observer ------------------------------------------------------------------------

    def measured(self, report: FragReport) -> None:
        self.snapshot.update(report)
        gpus = sum(p.gpus for p in report.falsely_starved)
        if self._starved_at is not None:
            then, starved = self._starved_at
            gap = (report.taken_at - then).total_seconds()
            if gap > 0 and starved:
                self.starved.inc(starved * min(gap, STARVED_GAP_S))
        self._starved_at = (report.taken_at, gpus)

    def planned(self, plan: Plan) -> None:
        if plan.solver.status != "NOT_SOLVED":
            self.solve_seconds.observe(plan.solver.runtime_s)

    def plan_closed(self, mode: str, outcome: PlanOutcome) -> None:
        self.plans.labels(mode, outcome).inc()

    def requeued(self, mode: str, lost_gpu_seconds: float) -> None:
        self.victims.labels(mode).inc()
        self.lost.labels(mode).inc(max(0.0, lost_gpu_seconds))

    def cycle_done(self, report: CycleReport, duration_s: float) -> None:
        self.cycle_seconds.observe(duration_s)
        self.cycles.labels(report.outcome).inc()
        self.last_cycle.set_to_current_time()
        if report.outcome == "read-only":
            # Another instance is the actor: its figures are the current ones, ours would
            # only go stale (and be counted twice by sum()). The preemption count is the
            # leader's to read: a standby spares the database.
            self.snapshot.update(None)
            self._starved_at = None  # the leader counts meanwhile
            return
        try:
            since = datetime.now(UTC) - timedelta(hours=1)
            self.preemptions.set(self.history.preemptions_since(since))
        except SQLAlchemyError as exc:  # keep the last value; the gauge is a convenience
            log.warning("metrics: preemptions of the last hour not read: %s", exc)

    def slurm_error(self, kind: SlurmErrorKind) -> None:
        self.slurm_errors.labels(kind).inc()

    def unreadable_jobs(self, part: RecordPart, count: int) -> None:
        """``count`` job records of one read could not be read whole (``part``)."""
        self.unreadable.labels(part.value).inc(count)
