"""The demo's driver helpers: what counts as left behind, where simulated time lies."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from slurm_defrag.demo import run, scenario

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def test_stray_lists_what_a_plan_or_packing_left_in_the_cluster() -> None:
    cluster = scenario.build(0, 600.0, EPOCH)
    cluster.advance(0)
    assert run.stray(cluster, []) == []
    cluster.create_reservation("defrag-abc", ["node05"], ["tara"], [], 0, 900)
    cluster.set_reservation("122", "defrag-abc")
    cluster.drain("node01", "slurm-defrag:abc consolidate")
    cluster.set_weight("node02", 4097)
    assert run.stray(cluster, []) == [
        "reservation defrag-abc",
        "node node01 drained (slurm-defrag:abc consolidate)",
        "node node02 Weight=4097",
        "job 122 in reservation defrag-abc",
    ]


def test_the_run_lies_in_the_past_of_the_wall_clock() -> None:
    """The history views end at the wall clock: a snapshot after it would not be shown."""
    now = datetime(2026, 5, 4, 12, 30, 17, tzinfo=UTC)
    epoch = run.epoch_for(now, 3600)
    assert epoch <= now - timedelta(hours=1)
    assert now - timedelta(hours=1, minutes=1) < epoch


def test_the_pace_counts_cycles_of_the_service_interval() -> None:
    assert run.Pace(speed=60, span_s=300 * 60).cycles == 300
    assert run.Pace(speed=1e6, span_s=1).cycles == 1
    assert run.hhmm(3 * 3600 + 7 * 60 + 59) == "03:07"
