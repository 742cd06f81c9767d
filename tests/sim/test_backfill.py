"""Slurm-style backfill planning (``bf_reserve="all"``): plans, will-run, engine rules."""

from __future__ import annotations

import numpy as np
from simkit import job, node

from slurm_defrag.sim.backfill import Plans, Reservation, plan, will_run
from slurm_defrag.sim.cluster import ClusterState
from slurm_defrag.sim.defrag import RunningJob
from slurm_defrag.sim.engine import Engine, EngineConfig
from slurm_defrag.sim.model import JobSpec, Placement
from slurm_defrag.sim.policies.base import PolicyContext
from slurm_defrag.sim.policies.registry import build


def _first(where: np.ndarray) -> int:  # type: ignore[type-arg]
    return int(np.flatnonzero(where)[0])


def _running(
    state: ClusterState, *placed: tuple[JobSpec, int, tuple[int, ...], float]
) -> dict[int, RunningJob]:
    out = {}
    for i, (j, n, gpus, start) in enumerate(placed):
        state.allocate(j, Placement(n, gpus))
        out[i] = RunningJob(j, Placement(n, gpus), start)
    return out


def test_plans_round_down_to_the_resolution_and_last_at_least_one_step() -> None:
    plans = Plans(resolution=60.0)
    assert plans.add(0, start=125.0, estimate=60.0, now=100.0) == Reservation(0, 120.0, 180.0)
    # starting within the current minute: the plan begins now; a short job still blocks
    # the node for one whole resolution step
    assert plans.add(1, start=101.0, estimate=10.0, now=100.0) == Reservation(1, 100.0, 160.0)
    assert plans.blocked(3, 100.0, 19.0).tolist() == [False, True, False]  # 120 > 119
    assert plans.blocked(3, 100.0, 20.0).tolist() == [True, True, False]  # begins at the end
    assert plans.blocked(3, 180.0, 60.0).tolist() == [False, False, False]  # both ended
    assert plans.shrinks(100.0) == 120.0  # node 0 becomes planned at 120
    assert plans.shrinks(120.0) is None


def _full_node(ends: tuple[float, float, float]) -> tuple[ClusterState, dict[int, RunningJob]]:
    """One 4-GPU node running 1-GPU jobs ending at ``ends[0]``, ``ends[1]`` and a 2-GPU
    job ending at ``ends[2]`` (their time limits, from start 0)."""
    s = ClusterState([node("a", 4)])
    x, y, z = (job(n, num=g, time_limit=t) for n, g, t in zip("xyz", (1, 1, 2), ends, strict=True))
    return s, _running(s, (x, 0, (0,), 0.0), (y, 0, (1,), 0.0), (z, 0, (2, 3), 0.0))


def test_will_run_releases_jobs_ending_close_together_as_one_group() -> None:
    # The first group runs to the 30 s boundary after the first end (120) plus 30 s: both
    # 1-GPU jobs go together, so even a 1-GPU job is planned at 145, not 100.
    s, running = _full_node((100.0, 145.0, 200.0))
    usable = np.ones(1, dtype=bool)
    assert will_run(s, job("p"), usable, running, 10.0, _first) == Reservation(0, 145.0)
    assert will_run(s, job("q", num=4), usable, running, 10.0, _first) == Reservation(0, 200.0)
    assert will_run(s, job("r", num=5), usable, running, 10.0, _first) is None
    assert will_run(s, job("p"), np.zeros(1, dtype=bool), running, 10.0, _first) is None


def test_will_run_window_doubles_after_each_group() -> None:
    # barrier 120: groups end at 150 ({100}), then 180 ({155}), then 240 ({190})
    s, running = _full_node((100.0, 155.0, 190.0))
    usable = np.ones(1, dtype=bool)
    assert will_run(s, job("p"), usable, running, 0.0, _first) == Reservation(0, 100.0)
    assert will_run(s, job("q", num=2), usable, running, 0.0, _first) == Reservation(0, 155.0)
    assert will_run(s, job("r", num=3), usable, running, 0.0, _first) == Reservation(0, 190.0)


def test_plan_skips_nodes_an_earlier_plan_blocks() -> None:
    s = ClusterState([node("a", 4), node("b", 4)])
    running = _running(
        s,
        (job("ra", num=4, time_limit=100.0), 0, (0, 1, 2, 3), 0.0),
        (job("rb", num=4, time_limit=300.0), 1, (0, 1, 2, 3), 0.0),
    )
    plans = Plans()
    head = plan(s, job("h", num=4, time_limit=100.0), running, 0.0, plans, _first)
    assert head == Reservation(0, 100.0)
    plans.add(0, 100.0, 100.0, 0.0)
    # the next 4-GPU job cannot use "a" while "h" is planned there, even though "a" is
    # free again at 200, before "b" (Slurm's will-run sees only the nodes no plan blocks
    # during the job's own time limit): "b" at 300
    p = job("p", num=4, time_limit=100.0)
    assert plan(s, p, running, 0.0, plans, _first) == Reservation(1, 300.0)


def _run(jobs: list[JobSpec], reserve: str) -> dict[str, str]:
    s = ClusterState([node("a", 4), node("b", 4), node("c", 4)])
    pol = build("first-fit", PolicyContext(s, (), np.arange(s.size)))
    cfg = EngineConfig(bf_interval=5.0, bf_reserve=reserve)  # type: ignore[arg-type]
    stats = Engine(s, jobs, pol, np.random.default_rng(0), config=cfg).run()
    return {
        j.name: "abc"[r.placement.node]
        for j, r in zip(jobs, stats.records, strict=True)
        if r.placement
    }


def test_planning_every_pending_job_keeps_backfill_off_their_nodes() -> None:
    # a and b are full until 100 and 200, c has 2 GPUs free until 1000. "h" (4 GPUs) is
    # planned on a, "p" (4 GPUs) on b. "s" (1 GPU, long) fits on b now: EASY protects only
    # the head's node and puts it there; Slurm's backfill also protects p's plan -> c.
    jobs = [
        job("ra", num=4, duration=100.0, time_limit=100.0),
        job("rb", num=3, duration=200.0, time_limit=200.0),
        job("rc", num=2, duration=1000.0, time_limit=1000.0),
        job("h", num=4, submit=1.0, time_limit=100.0),
        job("p", num=4, submit=1.0, time_limit=100.0),
        job("s", submit=2.0, duration=500.0, time_limit=500.0),
    ]
    assert _run(jobs, "head")["s"] == "b"
    assert _run(jobs, "all")["s"] == "c"
