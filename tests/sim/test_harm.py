"""Harm-aware defrag: user time limits, checkpoints, the victim's wait, reservations."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from simkit import job, node

from slurm_defrag.policy.cost import CostConfig, restart_wait_hours, victim_cost
from slurm_defrag.sim.cluster import ClusterState
from slurm_defrag.sim.defrag import DefragPlan, DefragView, RunningJob
from slurm_defrag.sim.engine import Engine, EngineConfig
from slurm_defrag.sim.frag import typical_types
from slurm_defrag.sim.model import JobSpec, Placement
from slurm_defrag.sim.planner_step import make_step
from slurm_defrag.sim.policies.base import PolicyContext
from slurm_defrag.sim.policies.registry import build
from slurm_defrag.sim.protocol_b import SettingsB, run_b
from slurm_defrag.sim.snapshot_view import to_snapshot
from slurm_defrag.sim.timed_workload import (
    EXACT_SHARE,
    ROUND_LIMITS_MIN,
    durations_by_gpus,
    user_time_limit,
    with_user_limits,
)

MAX_TIME = 6 * 3600.0


def _engine(jobs, nodes, step=None, cfg=None):  # type: ignore[no-untyped-def]
    s = ClusterState(nodes)
    pol = build("first-fit", PolicyContext(s, typical_types(jobs), np.arange(s.size)))
    return Engine(s, jobs, pol, np.random.default_rng(0), step, cfg or EngineConfig())


# -- time limits ------------------------------------------------------------------------


def test_user_time_limits_are_round_over_estimates_capped_at_max_time() -> None:
    rng = np.random.default_rng(1)
    durations = rng.uniform(60, 3600, 4000)
    limits = np.array([user_time_limit(float(d), MAX_TIME, rng) for d in durations])
    assert (limits >= durations).all() and (limits <= MAX_TIME).all()
    allowed = {m * 60.0 for m in ROUND_LIMITS_MIN} | {MAX_TIME}
    assert {float(x) for x in limits} <= allowed | {float(d) for d in durations}
    accuracy = durations / limits
    # a mode near 1 and many jobs using a small fraction of their limit
    assert (accuracy > 0.9).mean() > EXACT_SHARE / 2
    assert (accuracy < 0.3).mean() > 0.1
    assert np.median(accuracy) < 0.8


def test_user_limits_and_checkpoints_are_seeded() -> None:
    jobs = [job(f"j{i}", duration=100.0 + i) for i in range(200)]
    a = with_user_limits(jobs, MAX_TIME, 0.25, np.random.default_rng(3))
    b = with_user_limits(jobs, MAX_TIME, 0.25, np.random.default_rng(3))
    assert a == b
    share = np.mean([j.ckpt_interval is not None for j in a])
    assert 0.15 < share < 0.35
    assert all(j.time_limit is not None and j.time_limit >= j.duration for j in a)


# -- checkpoints ------------------------------------------------------------------------


class _RequeueAt:
    name = "test"

    def __init__(self, at: float) -> None:
        self.at, self.done = at, False

    def plan(self, view: DefragView) -> DefragPlan:
        if self.done or view.now < self.at:
            return DefragPlan()
        self.done = True
        return DefragPlan(requeue=tuple(sorted(view.running)[:1]))


@pytest.mark.parametrize(("ckpt", "lost_s"), [(None, 2040.0), (1800.0, 240.0)])
def test_requeue_loses_only_the_run_since_the_last_checkpoint(
    ckpt: float | None, lost_s: float
) -> None:
    jobs = [
        job("ckpt", num=8, duration=3600.0, ckpt_interval=ckpt),
        job("waits", num=8, submit=1.0, duration=10.0),  # keeps the defrag cycle going
    ]
    step = _RequeueAt(2000.0)
    stats = _engine(jobs, [node("a", 8)], step, EngineConfig(defrag_interval=60.0)).run()
    rec = stats.records[0]
    assert rec.requeues == 1
    assert stats.lost_gpu_h == pytest.approx(8 * lost_s / 3600)
    # it resumes at once (older than "waits") and runs what its checkpoint did not save
    saved = 2040.0 - lost_s
    assert rec.end == pytest.approx(2040.0 + 3600.0 - saved)
    assert stats.served_gpu_h == pytest.approx(8 * 1.0 + 8 * 10.0 / 3600)


def test_snapshot_declares_the_last_checkpoint_and_the_planner_prices_from_it() -> None:
    s = ClusterState([node("a", 8)])
    j = job("c", num=2, duration=9000.0, ckpt_interval=1800.0, time_limit=14400.0)
    s.allocate(j, Placement(0, (0, 1)))
    view = DefragView(4000.0, s, {0: RunningJob(j, Placement(0, (0, 1)), 0.0)}, [], 1)
    snap = to_snapshot(view).snapshot
    sj = snap.job_by_id["0"]
    assert "defrag:ckpt=" in sj.comment
    assert sj.time_limit_s == 14401  # the user's limit, not the run time
    c = victim_cost(sj, snap.taken_at, CostConfig())
    assert c.since_source == "checkpoint"
    assert c.lost_gpu_hours == pytest.approx(2 * 400 / 3600)


# -- the victim's wait ------------------------------------------------------------------


def _two_victims(free_elsewhere: bool):  # type: ignore[no-untyped-def]
    s = ClusterState([node("a", 8), node("b", 8)])
    running = {}
    v = job("v", num=2, duration=9000.0, time_limit=10800.0)
    s.allocate(v, Placement(0, (0, 1)))
    running[0] = RunningJob(v, Placement(0, (0, 1)), 0.0)
    fill = job("fill", num=8 if not free_elsewhere else 4, duration=9000.0, time_limit=7200.0)
    where = Placement(1, tuple(range(fill.num_gpu)))
    s.allocate(fill, where)
    running[1] = RunningJob(fill, where, 0.0)
    return to_snapshot(DefragView(3600.0, s, running, [], 1)).snapshot


def test_wait_after_requeue_is_zero_with_a_free_spot_else_the_limits_say() -> None:
    free = _two_victims(True)
    full = _two_victims(False)
    assert restart_wait_hours(free.job_by_id["0"], free, free.taken_at) == 0.0
    # node b's 8 GPUs free when "fill" reaches its 2 h limit, 1 h from now
    wait = restart_wait_hours(full.job_by_id["0"], full, full.taken_at)
    assert wait == pytest.approx(1.0, abs=0.01)
    cfg = CostConfig(requeue_wait_weight=1.0)
    cheap = victim_cost(free.job_by_id["0"], free.taken_at, cfg, 0.0)
    dear = victim_cost(full.job_by_id["0"], full.taken_at, cfg, wait)
    assert dear.cost == pytest.approx(cheap.cost + 2 * wait)
    assert dear.cost > cheap.cost


# -- reservations -----------------------------------------------------------------------


class _HoldFor:
    name = "hold"

    def __init__(self, jid: int, where: Placement) -> None:
        self.jid, self.where, self.done = jid, where, False

    def plan(self, view: DefragView) -> DefragPlan:
        if self.done or self.jid not in {j for j, _ in view.pending}:
            return DefragPlan()
        self.done = True
        return DefragPlan(hold={self.jid: self.where})


def test_a_reservation_keeps_its_gpus_for_the_target() -> None:
    jobs = [
        job("a", num=4, duration=500.0),  # GPUs 0-3
        job("b", num=4, duration=1000.0),  # GPUs 4-7
        job("big", num=4, submit=10.0, duration=100.0),
        job("small", num=1, submit=100.0, duration=5000.0),  # would take a freed GPU 0
    ]
    step = _HoldFor(2, Placement(0, (0, 1, 2, 3)))
    cfg = EngineConfig(defrag_interval=60.0)
    eng = _engine(jobs, [node("n", 8)], step, cfg)
    stats = eng.run()
    r = stats.records
    assert r[2].first_start == 500.0 and r[2].placement == Placement(0, (0, 1, 2, 3))
    assert r[3].first_start is not None and r[3].first_start >= 600.0
    assert eng.holds_made == 1 and not eng.holds


def test_an_unused_reservation_is_released() -> None:
    jobs = [job("a", num=8, duration=20000.0), job("big", num=8, submit=10.0, duration=10.0)]
    step = _HoldFor(1, Placement(0, tuple(range(8))))
    eng = _engine(jobs, [node("n", 8), node("m", 8)], step, EngineConfig(hold_max=300.0))
    stats = eng.run()
    assert stats.records[1].first_start is not None
    assert not eng.holds


# -- workloads and determinism -----------------------------------------------------------


def test_untimed_jobs_draw_run_times_of_the_same_gpu_count() -> None:
    ref = [job("r1", num=1, duration=10.0), job("r8", num=8, duration=800.0)]
    ref += [job("rs", milli=500, duration=5.0)]
    untimed = [job("u8", num=8, duration=0.0), job("u4", num=4, duration=0.0)]
    untimed += [job("us", milli=300, duration=0.0)]
    out = durations_by_gpus(untimed, ref, np.random.default_rng(0))
    assert [j.duration for j in out] == [800.0, 10.0, 5.0]


def test_multigpu_workload_loads_with_run_times(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from slurm_defrag import suite
    from slurm_defrag.traces import openb

    d = tmp_path / openb.FOLDER
    d.mkdir()
    (d / "openb_node_list_gpu_node.csv").write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"n{i},96000,400000,8,V100M32\n" for i in range(8))
    )
    (d / "openb_pod_list_default.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time\n"
        + "".join(f"p{i},1000,10,{1 + i % 2 * 7},1000,0,{100 + i}\n" for i in range(20))
    )
    (d / "openb_pod_list_multigpu50.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
        + "".join(f"m{i},1000,10,8,1000\n" for i in range(20))
    )
    s = suite.Suite(trace="multigpu50", policies=("first-fit",), seeds=(1,), loads=(1.0,),
                    scale=1.0, horizon_h=0.2, warmup_h=0.05, max_runtime_h=1.0)
    runs = suite.protocol_b(s, traces=tmp_path)
    assert runs[0].jobs > 0 and runs[0].large_jobs == runs[0].jobs


def test_protocol_b_with_limits_checkpoints_and_harm_is_deterministic(  # type: ignore[no-untyped-def]
    small_nodes, small_trace
) -> None:
    s = SettingsB(load=1.3, horizon=3600.0, warmup=600.0, max_runtime=600.0,
                  user_limits=True, ckpt_share=0.5)

    def once() -> dict[str, object]:
        r = run_b(small_nodes, small_trace, "first-fit", 5, s, make_step("planner-harm"))
        return {k: v for k, v in r.__dict__.items() if k != "wall_s"}

    a, b = once(), once()
    assert a == b
    assert a["unfinished"] == 0
