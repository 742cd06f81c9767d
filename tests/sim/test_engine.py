from __future__ import annotations

import numpy as np
from simkit import job, node

from slurm_defrag.sim.cluster import ClusterState
from slurm_defrag.sim.defrag import DefragPlan, DefragView
from slurm_defrag.sim.engine import Engine, EngineConfig
from slurm_defrag.sim.frag import typical_types
from slurm_defrag.sim.policies.base import PolicyContext
from slurm_defrag.sim.policies.registry import build


def _engine(jobs, nodes, step=None, cfg=None):  # type: ignore[no-untyped-def]
    s = ClusterState(nodes)
    pol = build("first-fit", PolicyContext(s, typical_types(jobs), np.arange(s.size)))
    return Engine(s, jobs, pol, np.random.default_rng(0), step, cfg or EngineConfig())


def test_fifo_blocks_then_backfill_starts_short_jobs_only() -> None:
    jobs = [
        job("long", num=2, submit=0, duration=1000),
        job("big", num=4, submit=1, duration=100),  # waits for "long"
        job("short", num=1, submit=2, duration=50),  # ends before big could start: backfills
        job("late", num=1, submit=3, duration=5000),  # would delay big on the only node
    ]
    stats = _engine(jobs, [node("a", 4)]).run()
    r = {j.name: rec for j, rec in zip(jobs, stats.records, strict=True)}
    assert r["long"].first_start == 0
    assert r["short"].first_start == 31  # first backfill pass, 30 s after "big" queued
    assert r["big"].first_start == 1000
    assert r["late"].first_start == 1100  # after big, not before it
    assert stats.backfilled == 1


def test_departures_free_resources_and_everything_finishes() -> None:
    jobs = [job(f"j{i}", submit=float(i), duration=10.0) for i in range(20)]
    stats = _engine(jobs, [node("a", 2)]).run()
    assert all(r.end is not None for r in stats.records)
    assert stats.served_gpu_h == sum(10.0 / 3600 for _ in jobs)


class _RequeueFirst:
    name = "test"

    def __init__(self) -> None:
        self.calls = 0

    def plan(self, view: DefragView) -> DefragPlan:
        self.calls += 1
        return (
            DefragPlan(requeue=tuple(sorted(view.running)[:5])) if self.calls == 1 else DefragPlan()
        )


def test_requeues_are_capped_and_cost_gpu_hours() -> None:
    jobs = [job(f"j{i}", submit=0.0, duration=600.0) for i in range(9)]  # one waits
    step = _RequeueFirst()
    stats = _engine(jobs, [node("a", 8)], step, EngineConfig(defrag_interval=60.0)).run()
    assert stats.requeues == 1  # 1 % of 8 running jobs, at least one
    assert abs(stats.lost_gpu_h - 60.0 / 3600) < 1e-9
    assert all(r.end is not None for r in stats.records)


def test_snapshot_view_reports_shared_gpus_as_busy_and_whole_jobs_as_jobs() -> None:
    from slurm_defrag.sim.defrag import RunningJob
    from slurm_defrag.sim.model import Placement
    from slurm_defrag.sim.snapshot_view import to_snapshot

    s = ClusterState([node("a", 4, topology="nvswitch-4"), node("b", 2)])
    whole, shared, waiting = job("w", num=2), job("s", milli=300), job("p", num=4, submit=5.0)
    s.allocate(whole, Placement(0, (0, 1)))
    s.allocate(shared, Placement(0, (3,)))
    running = {
        0: RunningJob(whole, Placement(0, (0, 1)), 1.0),
        1: RunningJob(shared, Placement(0, (3,)), 2.0),
    }
    view = DefragView(10.0, s, running, [(2, waiting), (3, job("q", milli=500))], 1)
    snap = to_snapshot(view)
    assert snap.node_by_name["a"].gpus_used == frozenset({3})
    assert snap.free_masks["a"] == 0b0100
    assert [j.id for j in snap.running_gpu_jobs()] == ["0"]
    assert [(j.id, j.request.gpus if j.request else 0) for j in snap.pending_gpu_jobs()] == [
        ("2", 4)
    ]
