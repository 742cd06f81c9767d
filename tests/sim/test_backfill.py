"""Slurm-style backfill planning (``bf_reserve="all"``): plans, will-run, engine rules."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simkit import job, node

from slurm_defrag.sim.backfill import Plans, Reservation, end_queue, plan, will_run
from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.defrag import RunningJob
from slurm_defrag.sim.engine import Engine, EngineConfig
from slurm_defrag.sim.model import JobSpec, Placement
from slurm_defrag.sim.placement.base import PolicyContext
from slurm_defrag.sim.placement.registry import build


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


def test_plan_never_reserves_a_node_the_job_excludes() -> None:
    """--exclude (job_submit.lua's keeping): "a" frees first, but the job may not use it;
    its plan is "b" (and its backfill shape is not that of the same job without it)."""
    s = ClusterState([node("a", 4), node("b", 4)])
    running = _running(
        s,
        (job("ra", num=4, time_limit=100.0), 0, (0, 1, 2, 3), 0.0),
        (job("rb", num=4, time_limit=300.0), 1, (0, 1, 2, 3), 0.0),
    )
    kept_off = job("p", num=4, time_limit=100.0, exclude=frozenset({"a"}))
    assert plan(s, kept_off, running, 0.0, Plans(), _first) == Reservation(1, 300.0)
    assert kept_off.shape != job("p", num=4, time_limit=100.0).shape


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


def _will_run_reference(
    state: ClusterState,
    j: JobSpec,
    usable: np.ndarray,  # type: ignore[type-arg]
    running: dict[int, RunningJob],
    now: float,
) -> Reservation | None:
    """The straightforward will-run (every usable node re-tested after every group), as
    it was before the walk was made incremental: the oracle for the fast one."""
    from slurm_defrag.sim.backfill import WILL_RUN_WINDOW, _capable, _fits

    usable = usable & _capable(state, j)
    cpu, mem, gpu = state.cpu_left.copy(), state.mem_left.copy(), state.gpu_left.copy()

    def fitting() -> np.ndarray:  # type: ignore[type-arg]
        out = np.zeros_like(usable)
        for n in np.flatnonzero(usable):
            out[n] = _fits(int(cpu[n]), int(mem[n]), gpu[n], j)
        return out

    if fitting().any():
        return Reservation(_first(fitting()), now)
    queue = sorted(
        (r.start + r.job.estimate, i) for i, r in running.items() if usable[r.where.node]
    )
    window, k = WILL_RUN_WINDOW, 0
    barrier = (math.floor(queue[0][0] / window) + 1) * window if queue else 0.0
    while k < len(queue):
        while True:
            end, i = queue[k]
            r = running[i]
            n = r.where.node
            cpu[n] += r.job.cpu_milli
            mem[n] += r.job.memory_mib
            for g in r.where.gpus:
                gpu[n, g] += r.job.gpu_milli
            k += 1
            if k == len(queue) or queue[k][0] > barrier + window:
                break
        ok = fitting()
        if ok.any():
            return Reservation(_first(ok), max(end, now))
        window *= 2
        while k < len(queue) and queue[k][0] > barrier + window:
            window *= 2
    return None


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    shape=st.sampled_from([(1, 1000), (1, 500), (2, 1000), (4, 1000), (8, 1000), (0, 0)]),
    cpu=st.sampled_from([1000, 16_000, 60_000]),
)
def test_fast_will_run_agrees_with_the_reference(
    seed: int, shape: tuple[int, int], cpu: int
) -> None:
    """Random clusters of 4- and 8-GPU nodes filled with whole and shared GPU jobs and
    CPU-only jobs; the incremental walk and a shared end queue give the reference's
    answer for every job shape, node mask and clock."""
    rng = np.random.default_rng(seed)
    s = ClusterState([node(f"n{i}", int(rng.choice([4, 8]))) for i in range(6)])
    running: dict[int, RunningJob] = {}
    for i in range(40):
        n = int(rng.integers(6))
        num, milli = [(1, 1000), (1, 300), (2, 1000), (0, 0), (4, 1000)][int(rng.integers(5))]
        j = job(
            f"r{i}",
            num=num,
            milli=milli,
            cpu=int(rng.choice([1000, 8000])),
            time_limit=float(rng.integers(1, 40) * 15),
        )
        free = [g for g in range(int(s.gpu_count[n])) if s.gpu_left[n, g] >= milli]
        if num > len(free) or s.cpu_left[n] < j.cpu_milli:
            continue
        where = Placement(n, tuple(free[:num]))
        s.allocate(j, where)
        running[i] = RunningJob(j, where, float(rng.integers(0, 100)))
    usable = rng.random(6) < 0.8
    want = job("w", num=shape[0], milli=shape[1], cpu=cpu)
    now = float(rng.integers(0, 300))
    ends = end_queue(s, running)
    expected = _will_run_reference(s, want, usable, running, now)
    assert will_run(s, want, usable, running, now, _first) == expected
    assert will_run(s, want, usable, running, now, _first, ends) == expected


def test_protocol_b_backfill_models() -> None:
    from slurm_defrag.errors import InputError
    from slurm_defrag.suite import engine_config

    assert engine_config("head") == EngineConfig()
    slurmctld = engine_config("all")
    assert (slurmctld.bf_reserve, slurmctld.bf_resolution) == ("all", 60.0)
    with pytest.raises(InputError, match="--backfill 'conservative'"):
        engine_config("conservative")
