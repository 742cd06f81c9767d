"""Retention: old snapshots roll up into hourly figures, open plans keep their data."""

from __future__ import annotations

from datetime import timedelta
from types import ModuleType

import pytest
from sqlalchemy import func, select

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.metrics.compute import compute
from slurm_defrag.store.codec import epoch
from slurm_defrag.store.database import Store
from slurm_defrag.store.frag_history import load_history
from slurm_defrag.store.models import GroupMetricHourly, NodeMetricHourly, Snapshot
from slurm_defrag.store.repo import Repository
from slurm_defrag.store.retention import RetentionPolicy

HOURS_STEP = 3
STEPS = 24  # three days


@pytest.fixture
def filled(
    store: Store, churn_module: ModuleType
) -> tuple[Repository, list[int], list[ClusterSnapshot]]:
    sim = churn_module.Churn(30, seed=11, ends_per_min=0.05, arrivals_per_min=0.05)
    repo = Repository(store)
    snaps = [sim.step(HOURS_STEP * 60) for _ in range(STEPS)]
    ids = [repo.save_snapshot(s, compute(s)) for s in snaps]
    return repo, ids, snaps


def _count(store: Store, table: type) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def test_prune_rolls_up_and_keeps_open_plans(
    filled: tuple[Repository, list[int], list[ClusterSnapshot]],
) -> None:
    repo, ids, snaps = filled
    now = epoch(snaps[-1].taken_at) + 60
    window = now - epoch(snaps[0].taken_at) + 3600
    before = load_history(repo.store, window, now=now, top_nodes=100)

    cluster = snaps[0].cluster
    pinned = repo.plans.create(cluster, "enforce", {}, snapshot_id=ids[2])
    closed = repo.plans.create(cluster, "dry-run", {}, snapshot_id=ids[3])
    repo.plans.update(closed, status="done")

    result = repo.prune(RetentionPolicy(snapshot_days=1, rollup_days=30, plan_days=30), now=now)
    old = [i for i, s in zip(ids, snaps, strict=True) if epoch(s.taken_at) < now - 86400 - 3600]
    assert result.snapshots_deleted >= len(old) - 1
    assert result.snapshots_kept_for_open_plans == 1
    assert result.hours_rolled_up > 0
    # The open plan's snapshot survives, exactly; the closed plan let go of its own.
    assert repo.load_snapshot(ids[2]) == snaps[2]
    assert repo.plans.get(closed).snapshot_id is None
    assert repo.plans.get(pinned).snapshot_id == ids[2]
    # Everything recent still loads exactly.
    with repo.store.engine.connect() as conn:
        kept = set(conn.scalars(select(Snapshot.id)))
    assert ids[3] not in kept
    for sid, snap in zip(ids, snaps, strict=True):
        if sid in kept:
            assert repo.load_snapshot(sid) == snap
    assert _count(repo.store, GroupMetricHourly) > 0
    assert _count(repo.store, NodeMetricHourly) > 0

    # The history views lose resolution, not totals.
    after = load_history(repo.store, window, now=now, top_nodes=100)
    by_node = {n.node: n for n in before.nodes}
    assert {n.node for n in after.nodes} == set(by_node)
    for n in after.nodes:
        assert n.unusable_gpu_hours == pytest.approx(by_node[n.node].unusable_gpu_hours)
        assert n.unusable_hours == pytest.approx(by_node[n.node].unusable_hours)
    assert after.series[0].t <= before.series[0].t.replace(minute=0, second=0)

    again = repo.prune(RetentionPolicy(snapshot_days=1, rollup_days=30, plan_days=30), now=now)
    assert (again.snapshots_deleted, again.hours_rolled_up, again.interval_rows_deleted) == (
        0,
        0,
        0,
    )


def test_rollups_and_closed_plans_expire(
    filled: tuple[Repository, list[int], list[ClusterSnapshot]],
) -> None:
    repo, ids, snaps = filled
    pid = repo.plans.create(snaps[0].cluster, "dry-run", {}, snapshot_id=ids[0])
    repo.plans.record_command(
        ["scontrol", "show", "node"], exit_code=0, duration_s=0.1, plan_id=pid
    )
    repo.plans.update(pid, status="aborted")
    far = epoch(snaps[-1].taken_at) + 40 * 86400
    result = repo.prune(RetentionPolicy(snapshot_days=1, rollup_days=2, plan_days=1), now=far)
    assert result.plans_deleted == 1
    assert repo.plans.commands() == []
    assert _count(repo.store, GroupMetricHourly) == 0
    assert repo.latest_id() is None  # every snapshot is past the horizon
    # The same writer carries on: it notices its last snapshot is gone and reloads.
    later = snaps[-1].model_copy(update={"taken_at": snaps[-1].taken_at + timedelta(hours=1)})
    assert repo.load_snapshot(repo.save_snapshot(later, compute(later))) == later


def test_policy_validation() -> None:
    with pytest.raises(ValueError, match="snapshot_days <= rollup_days"):
        RetentionPolicy(snapshot_days=10, rollup_days=5)
