"""Prometheus /metrics of the service on FakeSlurm + SQLite, the course example.

examples/course.json: 4 nodes x 8 A100 in partition ``batch`` (node03 A100 80GB), 9 GPUs
free, job 110 (3 NVLink GPUs) falsely starved (spatial); the plan requeues job 104.
"""

from __future__ import annotations

import json
import re
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import yaml
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.exc import OperationalError

from infra import EXAMPLES, ROOT
from service_helpers import CycleFactory, FakeClock, open_store, slurm_schedules
from slurm_defrag import wiring
from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.domain.plan import Plan
from slurm_defrag.metrics.compute import compute
from slurm_defrag.policy.limits import Usage, UserUsage
from slurm_defrag.service.http import ControlServer
from slurm_defrag.service.loop import Cycle
from slurm_defrag.service.observer import NO_OBSERVER, ObservedSlurm, error_kind
from slurm_defrag.service.preemption_history import StoreHistory
from slurm_defrag.service.prometheus import Exporter
from slurm_defrag.service.runner import Service
from slurm_defrag.service.settings import ServiceSettings
from slurm_defrag.slurm.failures import (
    SlurmError,
    SlurmParseError,
    SlurmRejectedError,
    SlurmUnavailableError,
)
from slurm_defrag.slurm.fake import FakeSlurm
from slurm_defrag.snapshot_file import load_snapshot
from slurm_defrag.store.database import Store
from slurm_defrag.store.plans import Plans
from slurm_defrag.synth import course_scenario

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def fake(clock: FakeClock) -> FakeSlurm:
    """The course example from its file (overrides conftest's synth copy: same content)."""
    return FakeSlurm(load_snapshot(EXAMPLES / "course.json"), clock=clock)


def samples(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def scrape(exporter: Exporter) -> Samples:
    resp = exporter.page({})
    assert resp.status == 200
    assert resp.content_type.startswith("text/plain; version=")
    return samples(resp.body.decode())


def value(got: Samples, name: str, **labels: str) -> float:
    return got[("slurm_defrag_" + name, frozenset(labels.items()))]


def series(got: Samples, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: v for (n, labels), v in got.items() if n == "slurm_defrag_" + name}


def observed(
    make_cycle: CycleFactory, fake: FakeSlurm, store: Store, mode: str, **kw: object
) -> tuple[Cycle, Exporter]:
    exporter = Exporter(StoreHistory(Plans(store.engine)))
    cycle = make_cycle(
        mode, observer=exporter, reader=ObservedSlurm(fake, exporter.slurm_error), **kw
    )
    return cycle, exporter


def test_gauges_equal_the_snapshot_figures(
    make_cycle: CycleFactory, fake: FakeSlurm, store: Store
) -> None:
    cycle, exporter = observed(make_cycle, fake, store, "dry-run")
    assert series(scrape(exporter), "free_gpus") == {}  # no snapshot read yet
    assert cycle.run().outcome == "planned"
    got = scrape(exporter)
    snapshot = fake.snapshot()
    report = compute(snapshot)
    # One partition: each (batch, model) group is the model's group of `frag`.
    models = {m.name: m for m in report.models}
    assert set(series(got, "free_gpus")) == {
        frozenset({("partition", "batch"), ("gpu_model", m)}) for m in models
    }
    for name, m in models.items():
        key = {"partition": "batch", "gpu_model": name}
        c = m.counts
        assert value(got, "gpus", **key) == c.gpus
        assert value(got, "free_gpus", **key) == c.free
        assert value(got, "free_unavailable_gpus", **key) == c.free_unavailable
        assert value(got, "largest_free_nvlink_block_gpus", **key) == m.largest_free_block
        assert value(got, "fgd_gpus", **key) == pytest.approx(c.fgd)
        for dim in ("spatial", "topology", "configuration"):
            assert value(got, "unusable_gpus", **key, dimension=dim) == getattr(c.unusable, dim)
    assert sum(series(got, "free_gpus").values()) == 9  # the course's 9 free GPUs
    assert sum(series(got, "free_gpus").values()) == sum(
        bin(mask).count("1") for mask in snapshot.free_masks.values()
    )
    (job,) = report.falsely_starved
    assert (job.job_id, job.reason) == ("110", "spatial")
    assert series(got, "falsely_starved_jobs") == {
        frozenset(
            {("partition", "batch"), ("gpu_model", job.gpu_model or "any"), ("reason", "spatial")}
        ): 1
    }
    assert value(got, "snapshot_timestamp_seconds") == snapshot.taken_at.timestamp()


def test_counters_of_a_dry_run_cycle(
    make_cycle: CycleFactory, fake: FakeSlurm, store: Store
) -> None:
    cycle, exporter = observed(make_cycle, fake, store, "dry-run")
    cycle.run()
    got = scrape(exporter)
    (rec,) = Plans(store.engine).recent()
    plan = Plan.model_validate(rec.inputs["plan"])
    assert [v.job_id for v in plan.victims] == ["104"]
    assert value(got, "plans_total", mode="dry-run", outcome="done") == 1
    assert value(got, "plans_total", mode="enforce", outcome="done") == 0
    assert value(got, "victims_requeued_total", mode="dry-run") == 1
    # The sandbox's clock is the planner's: the executor loses what the planner priced.
    assert value(got, "victim_gpu_seconds_lost_total", mode="dry-run") == pytest.approx(
        plan.victims[0].lost_gpu_hours * 3600
    )
    assert value(got, "cycles_total", outcome="planned") == 1
    assert value(got, "cycles_total", outcome="error") == 0
    assert value(got, "cycle_duration_seconds_count") == 1
    assert value(got, "solve_duration_seconds_count") == 1
    # The wall time is not in the plan JSON (same input, same bytes): the record has it.
    assert value(got, "solve_duration_seconds_sum") == pytest.approx(rec.solve_time_s)
    assert value(got, "last_cycle_timestamp_seconds") > 0
    assert value(got, "preemptions_last_hour") == 0  # dry-run requeues are not preemptions
    assert sum(series(got, "slurm_errors_total").values()) == 0


def test_enforce_counts_the_preemption(
    make_cycle: CycleFactory, fake: FakeSlurm, clock: FakeClock, store: Store
) -> None:
    cycle, exporter = observed(make_cycle, fake, store, "enforce")
    for _ in range(6):
        cycle.run()
        (rec,) = Plans(store.engine).recent()
        slurm_schedules(fake, Plan.model_validate(rec.inputs["plan"]))
        clock.tick(60)
        if not Plans(store.engine).get(rec.id).open:
            break
    got = scrape(exporter)
    assert Plans(store.engine).get(rec.id).status == "done"
    assert value(got, "plans_total", mode="enforce", outcome="done") == 1
    assert value(got, "victims_requeued_total", mode="enforce") == 1
    assert value(got, "victim_gpu_seconds_lost_total", mode="enforce") > 0
    assert value(got, "preemptions_last_hour") == 1
    assert value(got, "cycles_total", outcome="advanced") >= 1


def test_refused_plan_is_counted(make_cycle: CycleFactory, fake: FakeSlurm, store: Store) -> None:
    from slurm_defrag.policy.file import default_policy

    policy = default_policy()
    # The planner plans with max_victims_per_plan = 1; the executor re-checks with 0.
    cycle, exporter = observed(make_cycle, fake, store, "enforce")
    cycle.executor.policy = policy.model_copy(
        update={"limits": policy.limits.model_copy(update={"max_victims_per_plan": 0})}
    )
    cycle.run()
    assert value(scrape(exporter), "plans_total", mode="enforce", outcome="refused") == 1


class _Failing:
    name = "failing"

    def __init__(self, exc: SlurmError) -> None:
        self.exc = exc

    def snapshot(self) -> None:
        raise self.exc


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (SlurmUnavailableError("Slurm unavailable: squeue: connect failure"), "unavailable"),
        (SlurmRejectedError("Slurm rejected squeue: Invalid user"), "rejected"),
        (SlurmParseError("squeue --json: jobs[0].gres_detail: not a list"), "parse"),
    ],
)
def test_slurm_errors_by_kind(
    make_cycle: CycleFactory, fake: FakeSlurm, store: Store, exc: SlurmError, kind: str
) -> None:
    exporter = Exporter(StoreHistory(Plans(store.engine)))
    reader = ObservedSlurm(_Failing(exc), exporter.slurm_error)  # type: ignore[arg-type]
    cycle = make_cycle("dry-run", observer=exporter, reader=reader)
    outcome = cycle.run().outcome
    got = scrape(exporter)
    assert error_kind(exc) == kind
    assert series(got, "slurm_errors_total") == {
        frozenset({("kind", k)}): float(k == kind) for k in ("unavailable", "rejected", "parse")
    }
    assert value(got, "cycles_total", outcome=outcome) == 1
    assert outcome == ("slurm-unavailable" if kind == "unavailable" else "error")


def test_slurm_write_errors_are_counted_and_raised(fake: FakeSlurm, store: Store) -> None:
    exporter = Exporter(StoreHistory(Plans(store.engine)))
    backend = ObservedSlurm(fake, exporter.slurm_error)
    backend.update_node("node01", Weight="5")  # succeeds: nothing counted
    with pytest.raises(SlurmRejectedError):
        backend.requeue("no-such-job", "test")
    got = scrape(exporter)
    assert value(got, "slurm_errors_total", kind="rejected") == 1
    assert value(got, "slurm_errors_total", kind="unavailable") == 0
    assert backend.name == fake.name


def test_standby_exports_no_cluster_figures(
    make_cycle: CycleFactory, fake: FakeSlurm, store: Store, tmp_path: Path
) -> None:
    leader, _ = observed(make_cycle, fake, store, "off")
    standby, exporter = observed(make_cycle, fake, store, "off", holder="test:2")
    exporter.measured(compute(fake.snapshot()))  # as if it had been the leader before
    leader.run()
    assert standby.run().outcome == "read-only"
    settings = ServiceSettings(mode="off", http_port=0, kill_switch_file=tmp_path / "STOP")
    exporter.watch(Service(settings, standby, standby.lease))
    got = scrape(exporter)
    assert series(got, "free_gpus") == {}  # the leader's figures are the current ones
    assert value(got, "lease_held") == 0
    assert value(got, "mode", mode="off") == 1
    assert value(got, "mode", mode="enforce") == 0
    assert value(got, "kill_switch_engaged") == 0
    assert value(got, "cycles_total", outcome="read-only") == 1


def test_metrics_route_over_http_and_in_the_wiring(
    tmp_path: Path, fake: FakeSlurm, make_cycle: CycleFactory, store: Store
) -> None:
    cycle, exporter = observed(make_cycle, fake, store, "off")
    cycle.run()
    http = ControlServer(
        "127.0.0.1", 0, lambda: None, lambda: (True, {}), {"/metrics": exporter.page}
    )
    http.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{http.port}/metrics", timeout=5) as r:
            assert r.headers["Content-Type"] == CONTENT_TYPE_LATEST
            got = samples(r.read().decode())
    finally:
        http.close()
    assert sum(series(got, "free_gpus").values()) == 9

    db = tmp_path / "wired.db"
    open_store(db).close()
    # Without the HTTP endpoint nobody could read the metrics: no exporter at all.
    for metrics, port, on in ((True, 8787, True), (False, 8787, False), (True, 0, False)):
        settings = ServiceSettings(
            db_url=f"sqlite:///{db}",
            metrics=metrics,
            http_port=port,
            kill_switch_file=tmp_path / "STOP",
        )
        service, wired = wiring.build(settings)  # builds, binds nothing
        wired.close()
        assert ("/metrics" in service.pages) is on
        assert isinstance(service.cycle.reader, ObservedSlurm) is on
        assert (service.cycle.observer is not NO_OBSERVER) is on
        if on:  # the exporter reads the cycle's own preemption history
            assert service.cycle.observer.history is service.cycle.history  # type: ignore[attr-defined]


class _CountingHistory:
    def __init__(self) -> None:
        self.reads = 0

    def preemptions_since(self, since: datetime) -> int:
        self.reads += 1
        return 0

    def user_preemptions_since(self, user: str, since: datetime) -> int:
        return 0

    def victim_usage(self, user: str, since: datetime) -> Usage:
        return Usage()

    def beneficiary_usage(self, user: str, since: datetime) -> Usage:
        return Usage()

    def usage_by_user(self, since: datetime) -> UserUsage:
        return UserUsage()

    def active_plans(self) -> int:
        return 0


def test_standby_does_not_count_preemptions(
    make_cycle: CycleFactory, fake: FakeSlurm, store: Store
) -> None:
    leader = make_cycle("off")
    history = _CountingHistory()
    exporter = Exporter(history)
    standby = make_cycle("off", holder="test:2", observer=exporter)
    leader.run()
    assert standby.run().outcome == "read-only"
    assert history.reads == 0
    leader.lease.release()
    assert standby.run().outcome == "off"
    assert history.reads == 1


def test_scrape_answers_while_the_database_is_down(
    make_cycle: CycleFactory,
    fake: FakeSlurm,
    store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A standby asks the database who leads; a scrape must not: it answers 200 with
    ``up`` whatever the database does."""
    leader, _ = observed(make_cycle, fake, store, "off")
    standby, exporter = observed(make_cycle, fake, store, "off", holder="test:2")
    leader.run()
    assert standby.run().outcome == "read-only"
    settings = ServiceSettings(mode="off", http_port=0, kill_switch_file=tmp_path / "STOP")
    service = Service(settings, standby, standby.lease)
    exporter.watch(service)
    service.scheduler.start(paused=True)  # running, as in a started service

    def down() -> None:
        raise OperationalError("SELECT holder FROM leases", {}, Exception("connection refused"))

    monkeypatch.setattr(standby.lease, "info", down)
    http = ControlServer("127.0.0.1", 0, None, service.health, {"/metrics": exporter.page})
    http.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{http.port}/metrics", timeout=5) as r:
            assert r.status == 200
            got = samples(r.read().decode())
        with urllib.request.urlopen(f"http://127.0.0.1:{http.port}/healthz", timeout=5) as r:
            assert r.status == 200
            assert json.loads(r.read())["lease"].startswith("unknown: database error")
    finally:
        http.close()
        service.scheduler.shutdown(wait=False)
    assert value(got, "up") == 1
    assert value(got, "lease_held") == 0
    assert value(got, "kill_switch_engaged") == 0
    (tmp_path / "STOP").touch()
    assert value(scrape(exporter), "kill_switch_engaged") == 1


# -- the dashboard, the alert rules and the docs use only series the exporter has --------

CONTRIB = ROOT / "contrib"
NAME = re.compile(r"\bslurm_defrag_[a-z0-9_]+")


def exposed_names(
    make_cycle: CycleFactory, fake: FakeSlurm, store: Store, tmp_path: Path
) -> set[str]:
    """Every sample name of a service that has planned (so every family has a sample)."""
    cycle, exporter = observed(make_cycle, fake, store, "dry-run")
    cycle.run()
    settings = ServiceSettings(http_port=0, kill_switch_file=tmp_path / "STOP")
    exporter.watch(Service(settings, cycle, cycle.lease))
    return {name for name, _ in scrape(exporter)}


def dashboard_exprs() -> list[str]:
    board = json.loads((CONTRIB / "grafana" / "slurm-defrag.json").read_text())
    return [t["expr"] for p in board["panels"] for t in p.get("targets", [])]


def alert_exprs() -> list[str]:
    rules = yaml.safe_load((CONTRIB / "prometheus" / "alerts.yml").read_text())
    return [r["expr"] for g in rules["groups"] for r in g["rules"]]


def test_dashboard_and_alerts_use_exposed_series(
    make_cycle: CycleFactory, fake: FakeSlurm, store: Store, tmp_path: Path
) -> None:
    names = exposed_names(make_cycle, fake, store, tmp_path)
    exprs = dashboard_exprs()
    rules = alert_exprs()
    assert len(exprs) >= 10
    assert len(rules) >= 5
    used = {n for e in exprs + rules for n in NAME.findall(e)}
    assert used - names == set()
    # The dashboard covers the figures.
    for family in (
        "free_gpus",
        "unusable_gpus",
        "largest_free_nvlink_block_gpus",
        "fgd_gpus",
        "falsely_starved_jobs",
        "plans_total",
        "victims_requeued_total",
        "victim_gpu_seconds_lost_total",
        "cycle_duration_seconds_bucket",
        "solve_duration_seconds_bucket",
        "slurm_errors_total",
    ):
        assert "slurm_defrag_" + family in used, family


def test_docs_list_every_series(
    make_cycle: CycleFactory, fake: FakeSlurm, store: Store, tmp_path: Path
) -> None:
    names = exposed_names(make_cycle, fake, store, tmp_path)
    # ours; the standard process_*/python_info series are described in prose
    families = {
        re.sub(r"_(bucket|sum|count)$", "", n)
        for n in names
        if not n.endswith("_created") and n.startswith("slurm_defrag_")
    }
    documented = set(NAME.findall((ROOT / "docs" / "observability.md").read_text()))
    assert families - documented == set()
    assert documented - families - names == set()


def test_build_info_and_process_series(
    make_cycle: CycleFactory, fake: FakeSlurm, store: Store, tmp_path: Path
) -> None:
    from slurm_defrag import __version__

    names = exposed_names(make_cycle, fake, store, tmp_path)
    assert {
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_start_time_seconds",
        "python_info",
    } <= names
    _, exporter = observed(make_cycle, fake, store, "dry-run")
    got = scrape(exporter)
    (labels,) = [dict(lbl) for (name, lbl) in got if name == "slurm_defrag_build_info"]
    assert labels["version"] == __version__
    assert labels["ortools"] not in ("", "none")


def test_unreadable_job_records_are_counted_by_reason(
    make_cycle: CycleFactory, store: Store, clock: FakeClock
) -> None:
    """Issue #40: a cycle over a read with one job that did not read whole (104: its time)
    and one record left out (no known state) plans around them and counts both, by part,
    where reads pass (so a fresh read before a requeue counts too)."""
    from builders import course_small_victims, unreadable
    from slurm_defrag.domain.cluster import RecordPart

    # (the course with other ways than 104 that are no swap: builders.course_small_victims)
    snap = unreadable(course_small_victims(), "104", "time: w: jobs[3].submit_time: out of range")
    left = "state: w: jobs[10].job_state: unknown job state 'SLEEPING' (job 120)"
    snap = ClusterSnapshot.model_validate({**snap.model_dump(), "left_out": [left]})
    exporter = Exporter(StoreHistory(Plans(store.engine)))
    reader = ObservedSlurm(
        FakeSlurm(snap, clock=clock), exporter.slurm_error, exporter.unreadable_jobs
    )
    cycle = make_cycle("dry-run", observer=exporter, reader=reader)
    assert cycle.run().outcome == "planned"
    (rec,) = Plans(store.engine).recent()
    assert "104" not in {v.job_id for v in Plan.model_validate(rec.inputs["plan"]).victims}
    got = series(scrape(exporter), "unreadable_jobs_total")
    assert got == {
        frozenset({("reason", p.value)}): float(p in (RecordPart.TIME, RecordPart.STATE))
        for p in RecordPart
    }


def test_falsely_starved_gpu_seconds_accumulate_between_snapshots(store: Store) -> None:
    """Job 110 of the course (3 GPUs) is falsely starved: each snapshot's 3 GPUs count
    until the next snapshot, a gap of an hour for 10 minutes only."""
    exporter = Exporter(StoreHistory(Plans(store.engine)))
    course = course_scenario()
    for minutes in (0, 1, 2, 62):
        snap = course.model_copy(update={"taken_at": course.taken_at + timedelta(minutes=minutes)})
        exporter.measured(compute(snap))
    assert value(scrape(exporter), "falsely_starved_gpu_seconds_total") == 3 * (60 + 60 + 600)
