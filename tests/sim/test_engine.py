from __future__ import annotations

from dataclasses import replace

import numpy as np
from simkit import job, node

from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.defrag import DefragPlan, DefragView
from slurm_defrag.sim.engine import Engine, EngineConfig
from slurm_defrag.sim.frag import typical_types
from slurm_defrag.sim.model import JobSpec
from slurm_defrag.sim.placement.base import PolicyContext
from slurm_defrag.sim.placement.registry import build


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
    snap = to_snapshot(view).snapshot
    assert snap.node_by_name["a"].gpus_used == frozenset({3})
    assert snap.free_masks["a"] == 0b0100
    assert [j.id for j in snap.running_gpu_jobs()] == ["0"]
    assert [(j.id, j.request.gpus if j.request else 0) for j in snap.pending_gpu_jobs()] == [
        ("2", 4)
    ]


def test_snapshot_view_carries_cpus_and_memory() -> None:
    from slurm_defrag.sim.defrag import RunningJob
    from slurm_defrag.sim.model import Placement
    from slurm_defrag.sim.snapshot_view import to_snapshot

    s = ClusterState([node("a", 4, cpu=32_000, mem=100_000)])
    whole, cpu_only = job("w", num=2, cpu=6_500, mem=10_000), job("c", num=0, milli=0, cpu=8_000)
    s.allocate(whole, Placement(0, (0, 1)))
    s.allocate(cpu_only, Placement(0, ()))
    running = {
        0: RunningJob(whole, Placement(0, (0, 1)), 1.0),
        1: RunningJob(cpu_only, Placement(0, ()), 1.0),
    }
    view = DefragView(10.0, s, running, [(2, job("p", num=2, cpu=2_500, mem=5_000))], 1)
    snap = to_snapshot(view).snapshot
    a = snap.node_by_name["a"]
    # 32 - 14.5 CPUs free = 17.5 -> 17 whole CPUs; memory exact.
    assert (a.cpus, a.cpus_free, a.memory_mb, a.memory_free_mb) == (32, 17, 100_000, 82_000)
    held = snap.job_by_id["0"]
    assert (held.cpus_per_node, held.memory_mb_per_node) == (6, 10_000)  # a victim frees >= 6
    asked = snap.job_by_id["2"]
    assert (asked.cpus_per_node, asked.memory_mb_per_node) == (3, 5_000)  # a target needs <= 3


def test_backfill_plans_with_time_limits() -> None:
    # "a" runs a 100 s job on 4 of 8 GPUs; "big" (8 GPUs) waits for it. "small" (4 GPUs,
    # 50 s) fits now and ends before "big" could start -- unless its time limit says it
    # might run 200 s, which would delay "big": then backfill must not start it.
    def first_start(limit: float | None) -> float | None:
        jobs = [
            job("run", num=4, duration=100.0),
            job("big", num=8, submit=1.0),
            job("small", num=4, submit=2.0, duration=50.0, time_limit=limit),
        ]
        stats = _engine(jobs, [node("a", 8)], None, EngineConfig(bf_interval=5.0)).run()
        return stats.records[2].first_start

    assert first_start(None) == 6.0  # first backfill pass: 5 s after "big" blocked
    late = first_start(200.0)
    assert late is not None
    assert late >= 100.0


def test_submit_hook_runs_once_per_job_at_its_arrival() -> None:
    """Per-job routing answers from the moment's table: the engine asks at arrival (not
    before the run), and a requeued job keeps what it was given, as in slurmctld."""
    seen: list[tuple[str, float]] = []

    def submit(j: JobSpec) -> JobSpec:
        seen.append((j.name, engine.now))
        return replace(j, prefer="f_" + j.name)

    jobs = [job(f"j{i}", submit=float(10 * i), duration=600.0) for i in range(9)]
    s = ClusterState([node("a", 8)])
    pol = build("first-fit", PolicyContext(s, typical_types(jobs), np.arange(s.size)))
    engine = Engine(
        s,
        jobs,
        pol,
        np.random.default_rng(0),
        _RequeueFirst(),
        EngineConfig(defrag_interval=60.0),
        submit=submit,
    )
    stats = engine.run()
    assert stats.requeues == 1
    assert seen == [(f"j{i}", float(10 * i)) for i in range(9)]
    assert [j.prefer for j in engine.jobs] == [f"f_j{i}" for i in range(9)]
