"""The impact report's figures (store/impact.py) equal the hand-computed ones of a small
constructed history (tests/impact_history.py), on SQLite and PostgreSQL."""

from __future__ import annotations

import statistics
from datetime import timedelta

import pytest
from sqlalchemy import update

import impact_history as ih
from slurm_defrag.domain.accounting import AccountedJob
from slurm_defrag.errors import InputError
from slurm_defrag.metrics.compute import compute
from slurm_defrag.store.database import Store
from slurm_defrag.store.database_errors import NotFound
from slurm_defrag.store.impact import ChangePoint, Impact, load_impact
from slurm_defrag.store.models import Snapshot
from slurm_defrag.store.repo import Repository

NOW = ih.NOW.timestamp()


def _load(store: Store, change: str = "mode", **kw: object) -> Impact:
    return load_impact(store, ih.SINCE_S, ChangePoint.parse(change, NOW), now=NOW, **kw)  # type: ignore[arg-type]


@pytest.fixture
def built(store: Store) -> Store:
    ih.build(store)
    return store


def test_figures_equal_the_hand_computed_ones(built: Store) -> None:
    r = _load(built)
    e = ih.Expected
    assert r.change_at == ih.CHANGE
    assert "dry-run to enforce" in r.change
    b, a = r.before, r.after
    assert (b.start, b.end, a.start, a.end) == (ih.T0, ih.CHANGE, ih.CHANGE, ih.NOW)
    assert b.hours == a.hours == e.period_hours
    assert (b.snapshots, a.snapshots) == (60, 60)  # [0, 10 h) and [10 h, 20 h)
    assert (b.jobs, a.jobs) == (len(e.before_waits), len(e.after_waits))
    assert b.wait_mean_h == statistics.fmean(e.before_waits)
    assert a.wait_mean_h == statistics.fmean(e.after_waits)
    assert (b.wait_median_h, a.wait_median_h) == (2.0, 0.5)  # the lower median of two
    assert (b.large_jobs, a.large_jobs) == (len(e.before_large), len(e.after_large))
    assert (b.large_wait_mean_h, a.large_wait_mean_h) == (4.0, 1.0)
    assert r.straddling == e.straddling
    assert b.falsely_starved_gpu_hours == pytest.approx(e.before_starved_gpu_hours)
    assert a.falsely_starved_gpu_hours == e.after_starved_gpu_hours
    assert (b.plans, a.plans) == (e.before_plans, e.after_plans)
    assert (b.plan_modes, a.plan_modes) == ({"dry-run": 1}, {"enforce": 2})
    assert (b.requeues, a.requeues) == (0, e.after_requeues)
    assert (b.gpu_hours_lost, a.gpu_hours_lost) == (0.0, e.after_gpu_hours_lost)
    assert (b.dry_run_requeues, a.dry_run_requeues) == (e.before_dry_run_requeues, 0)


def test_unusable_and_fgd_are_the_snapshots_means(built: Store) -> None:
    """Recomputed here from the snapshots themselves: the mean over each period."""
    figures: dict[str, list[tuple[float, float, int]]] = {"before": [], "after": []}
    for snap in ih.snapshots():
        c = compute(snap).cluster_metrics.counts
        if snap.taken_at < ih.NOW:
            period = "before" if snap.taken_at < ih.CHANGE else "after"
            figures[period].append((c.unusable.total, c.fgd, c.unusable.spatial))
    r = _load(built)
    for period, values in ((r.before, figures["before"]), (r.after, figures["after"])):
        assert period.unusable == pytest.approx(statistics.fmean(v[0] for v in values))
        assert period.fgd == pytest.approx(statistics.fmean(v[1] for v in values))
        assert period.unusable_spatial == pytest.approx(statistics.fmean(v[2] for v in values))


def test_comparisons_are_after_minus_before_per_unit(built: Store) -> None:
    r = _load(built)
    rows = {c.key: c for c in r.comparisons}
    e = ih.Expected
    assert rows["wait_all"].difference == pytest.approx(
        statistics.fmean(e.after_waits) - statistics.fmean(e.before_waits)
    )
    days = e.period_hours / 24
    assert rows["requeues"].after == pytest.approx(e.after_requeues / days)
    assert rows["gpu_hours_lost"].after == pytest.approx(e.after_gpu_hours_lost / days)
    assert rows["plans_aborted"].before == 0
    assert rows["falsely_starved"].before == pytest.approx(e.before_starved_gpu_hours / days)
    for c in r.comparisons:
        if c.difference is not None and c.low is not None and c.high is not None:
            assert c.low <= c.difference + 1e-9
            assert c.difference <= c.high + 1e-9
    # The intervals are the seed's: the same seed, the same report.
    assert _load(built, seed=3).comparisons == _load(built, seed=3).comparisons


def test_a_change_time_and_the_recorded_mode_agree(built: Store) -> None:
    given = _load(built, "2026-06-01T10:00Z")
    assert given.change == "given (--change-at)"
    assert given.before == _load(built).before
    assert _load(built, "2026-06-01 10:00").change_at == ih.CHANGE  # no zone: UTC
    assert _load(built, "10h").change_at == ih.CHANGE  # 10 h before NOW


def test_without_modes_on_the_snapshots_the_plans_tell(built: Store) -> None:
    """A database written before revision 0003: the first enforce plan after the last
    dry-run plan is the switch."""
    with built.engine.begin() as conn:
        conn.execute(update(Snapshot).values(mode=None))
    r = _load(built)
    assert r.change_at == ih.h(12)
    assert "plan" in r.change


def test_sacct_refines_and_completes_the_waits(built: Store) -> None:
    sacct = [
        AccountedJob("4", ih.h(0.5).timestamp(), ih.h(2).timestamp(), 1),  # A: 1.5 h, not 2
        AccountedJob("99", ih.h(1).timestamp(), ih.h(4).timestamp(), 8),  # never seen: 3 h
        AccountedJob("98", ih.h(1).timestamp(), ih.h(2).timestamp(), 0),  # no GPU: not ours
        AccountedJob("97", ih.h(1).timestamp(), None, 8),  # not started
    ]
    r = _load(built, sacct=sacct)
    assert r.before.jobs == 3
    assert r.before.wait_mean_h == pytest.approx((1.5 + 4 + 3) / 3)
    assert r.before.large_jobs == 2
    assert "1 jobs' times replaced, 1 GPU jobs" in r.waits_from


def test_sacct_refines_the_first_run_of_a_requeued_job_only(built: Store) -> None:
    # Found live (#44, CI of 4d50d2f): sacct without -D shows a requeued job's last run,
    # Submit = when it was requeued; its wait replaced the first run's. With -D every run
    # is listed and the first is the one the snapshots' job_runs.run == 0 is.
    first = AccountedJob("4", ih.h(0.5).timestamp(), ih.h(2).timestamp(), 1)
    later = AccountedJob("4", ih.h(2.5).timestamp(), ih.h(3).timestamp(), 1)
    with_d = _load(built, sacct=[later, first])
    assert with_d.before.wait_mean_h == _load(built, sacct=[first]).before.wait_mean_h
    without_d = _load(built, sacct=[later])
    assert without_d.before.wait_mean_h == _load(built).before.wait_mean_h
    assert "0 jobs' times replaced" in without_d.waits_from


def test_bad_change_points_and_windows(built: Store) -> None:
    with pytest.raises(InputError, match="--change-at: 'soon' is not"):
        ChangePoint.parse("soon")
    with pytest.raises(InputError, match="one period would be empty"):
        _load(built, "2026-05-20T00:00Z")
    with pytest.raises(NotFound, match="no snapshots of cluster 'constructed' in this window"):
        load_impact(built, 3600, ChangePoint.parse("mode"), now=NOW + 30 * 86400)


def test_an_empty_database_and_no_recorded_switch_are_not_found(store: Store) -> None:
    with pytest.raises(NotFound, match="no snapshots in the database yet"):
        load_impact(store, ih.SINCE_S, ChangePoint.parse("mode"), now=NOW)
    repo = Repository(store)
    for snap in list(ih.snapshots())[:12]:
        repo.save_snapshot(snap, compute(snap), "dry-run")
    with pytest.raises(NotFound, match="no switch from dry-run to enforce"):
        load_impact(store, ih.SINCE_S, ChangePoint.parse("mode"), now=NOW)


def test_waits_start_at_the_first_snapshot(built: Store) -> None:
    """The F jobs started before the first snapshot: no period counts them, whatever the
    window (their start was not seen)."""
    wide = load_impact(built, 30 * 86400, ChangePoint.parse("mode"), now=NOW)
    assert wide.before.jobs == len(ih.Expected.before_waits)
    assert wide.since < ih.T0 - timedelta(days=20)
