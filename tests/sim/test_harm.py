"""Harm-aware defrag: user time limits, checkpoints, restart-wait cost, reservations."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from simkit import job
from simkit import node as simnode

from builders import node, snapshot
from slurm_defrag.domain.cluster import Job, JobState
from slurm_defrag.policy.cost import CostConfig, restart_wait_hours, victim_cost
from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.defrag import DefragPlan, DefragView
from slurm_defrag.sim.engine import Engine, EngineConfig
from slurm_defrag.sim.frag import typical_types
from slurm_defrag.sim.model import Placement
from slurm_defrag.sim.placement.base import PolicyContext
from slurm_defrag.sim.placement.registry import build
from slurm_defrag.sim.timed_workload import (
    ROUND_LIMITS_MIN,
    durations_by_gpus,
    user_time_limit,
    with_user_limits,
)
from slurm_defrag.synth import EPOCH

NOW = EPOCH
MAX = 6 * 3600.0


# -- time limits as users set them ------------------------------------------------------


def test_user_limits_are_round_cover_the_run_and_respect_maxtime() -> None:
    rng = np.random.default_rng(1)
    rounds = {m * 60.0 for m in ROUND_LIMITS_MIN} | {MAX}
    for d in rng.uniform(1, MAX, 2000):
        lim = user_time_limit(float(d), MAX, rng)
        assert d <= lim <= MAX
        assert lim in rounds or lim == d  # a run at MaxTime keeps its own length
    # widely spread accuracy (Tsafrir et al.): many short jobs use a small part of their
    # limit (long ones are squeezed by MaxTime)
    ratios = [d / user_time_limit(float(d), MAX, rng) for d in rng.uniform(60, 1800, 2000)]
    assert np.median(ratios) < 0.7
    assert np.mean(np.array(ratios) < 0.2) > 0.1


def test_user_limits_seeded_and_ckpt_share() -> None:
    jobs = [job(f"j{i}", duration=600.0) for i in range(1000)]
    a = with_user_limits(jobs, MAX, 0.25, np.random.default_rng(7))
    b = with_user_limits(jobs, MAX, 0.25, np.random.default_rng(7))
    assert a == b
    share = np.mean([j.ckpt_interval is not None for j in a])
    assert 0.2 < share < 0.3
    assert all(j.ckpt_interval in (None, 1800.0) for j in a)


def test_untimed_jobs_draw_run_times_of_their_gpu_count() -> None:
    ref = [job("a", num=1, duration=10.0), job("b", num=8, duration=500.0)]
    out = durations_by_gpus(
        [job("x", num=8, duration=0), job("y", num=1, duration=0)], ref, np.random.default_rng(0)
    )
    assert [j.duration for j in out] == [500.0, 10.0]


# -- checkpoints in the engine ----------------------------------------------------------


class _RequeueAt:
    name = "test"

    def __init__(self, at: float) -> None:
        self.at = at

    def plan(self, view: DefragView) -> DefragPlan:
        if view.now == self.at:
            return DefragPlan(requeue=tuple(view.running))
        return DefragPlan()


def _engine(jobs, nodes, step=None, cfg=None):  # type: ignore[no-untyped-def]
    s = ClusterState(nodes)
    pol = build("first-fit", PolicyContext(s, typical_types(jobs), np.arange(s.size)))
    return Engine(s, jobs, pol, np.random.default_rng(0), step, cfg or EngineConfig())


@pytest.mark.parametrize("ckpt", [None, 1800.0])
def test_requeue_loses_only_since_last_checkpoint(ckpt: float | None) -> None:
    # a 2-GPU job of 3 h requeued at 1 h 10 min (+ a waiting job so defrag cycles run)
    jobs = [
        job("ck", num=2, duration=3 * 3600.0, ckpt_interval=ckpt),
        job("wait", num=4, submit=1.0, duration=10.0),
    ]
    at = 4200.0
    eng = _engine(jobs, [simnode("a", 4)], _RequeueAt(at), EngineConfig(defrag_interval=60.0))
    stats = eng.run()
    rec = stats.records[0]
    assert rec.requeues == 1
    since = at if ckpt is None else at - 3600.0  # two checkpoints: at 30 and 60 min
    assert rec.lost_gpu_h == pytest.approx(2 * since / 3600)
    saved = at - since
    # restarted at once on the freed GPUs: runs only what its checkpoints did not save
    assert rec.end == pytest.approx(at + 3 * 3600.0 - saved)


# -- reservations (drain plans) ----------------------------------------------------------


class _HoldOnce:
    name = "test"

    def plan(self, view: DefragView) -> DefragPlan:
        ids = [jid for jid, j in view.pending if j.num_gpu == 4]
        if ids and not view.held:
            return DefragPlan(hold={ids[0]: Placement(0, (0, 1, 2, 3))})
        return DefragPlan()


def test_a_hold_keeps_new_jobs_off_the_block_and_starts_its_job() -> None:
    jobs = [
        job("blocker", num=2, duration=600.0),
        job("big", num=4, submit=1.0, duration=100.0),
        job("small", num=1, submit=120.0, duration=5000.0),  # would take a freed GPU
    ]
    eng = _engine(jobs, [simnode("a", 4)], _HoldOnce(), EngineConfig(defrag_interval=60.0))
    stats = eng.run()
    r = {j.name: rec for j, rec in zip(jobs, stats.records, strict=True)}
    assert r["big"].first_start == 600.0
    assert r["small"].first_start is not None
    assert r["small"].first_start >= 700.0
    assert eng.holds_made == 1


def test_same_seed_same_result_with_limits_and_checkpoints(small_nodes, small_trace) -> None:  # type: ignore[no-untyped-def]
    from slurm_defrag.sim.protocol_b import SettingsB, run_b

    s = SettingsB(
        load=1.2,
        horizon=3600.0,
        warmup=600.0,
        max_runtime=600.0,
        user_limits=True,
        ckpt_share=0.5,
    )
    a = run_b(small_nodes, small_trace, "first-fit", seed=3, settings=s)
    b = run_b(small_nodes, small_trace, "first-fit", seed=3, settings=s)
    strip = lambda r: {k: v for k, v in r.__dict__.items() if k != "wall_s"}  # noqa: E731
    assert strip(a) == strip(b)
    assert a.unfinished == 0


# -- harm-aware victim cost (the product's policy/cost.py) --------------------------------


def _run(jid: str, gpus: dict[str, set[int]], hours: float, limit_h: float, **kw: object) -> Job:
    return Job(
        id=jid,
        state=JobState.RUNNING,
        partition="batch",
        gpus={n: frozenset(g) for n, g in gpus.items()},
        start_time=NOW - timedelta(hours=hours),
        time_limit_s=int(limit_h * 3600),
        **kw,  # type: ignore[arg-type]
    )


def test_restart_wait_zero_when_free_gpus_elsewhere() -> None:
    v = _run("v", {"n1": {0, 1}}, 1, 4)
    snap = snapshot([node("n1"), node("n2")], [v])
    assert restart_wait_hours(v, snap, NOW) == 0.0


def test_restart_wait_is_the_time_limit_end_of_blockers() -> None:
    v = _run("v", {"n1": {0, 1}}, 1, 4)
    # n2: 7 GPUs busy until their limit in 3 h, 1 free; v needs 2
    b = _run("b", {"n2": set(range(7))}, 1, 4)
    snap = snapshot([node("n1"), node("n2")], [v, b])
    assert restart_wait_hours(v, snap, NOW) == pytest.approx(3.0)
    # no other node: the cap
    alone = snapshot([node("n1")], [v])
    assert restart_wait_hours(v, alone, NOW, cap_hours=24.0) == 24.0


def test_cost_ordering_wait_and_checkpoint() -> None:
    cfg = CostConfig(restart_cost_gpu_hours=0.0, requeue_wait_weight=1.0)
    plain = _run("p", {"n1": {0, 1}}, 2, 4)
    ckpt = _run("c", {"n1": {2, 3}}, 2, 4, comment="defrag:ckpt=2026-11-29T11:30:00Z")
    # same lost work, one can restart at once, the other waits 3 h: the waiting one is dearer
    free = victim_cost(plain, NOW, cfg, 0.0)
    waits = victim_cost(plain, NOW, cfg, 3.0)
    assert free.cost < waits.cost
    assert waits.cost == pytest.approx(2 * 2 + 2 * 3)
    # a recent checkpoint cuts lost work to the time since it
    c = victim_cost(ckpt, NOW, cfg, 0.0)
    assert c.since_source == "checkpoint"
    assert c.cost < free.cost
    # weight 0 (the default): the wait is not counted (today's planner)
    assert victim_cost(plain, NOW, CostConfig(restart_cost_gpu_hours=0.0), 3.0).cost == 4.0
