"""The real planner as the simulator's defrag step (``--defrag planner-large``)."""

from __future__ import annotations

import pytest
from simkit import job, node

from slurm_defrag.errors import InputError
from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.defrag import DefragView, RunningJob
from slurm_defrag.sim.defrag_steps import StepLimits
from slurm_defrag.sim.model import Placement
from slurm_defrag.sim.planner_step import make_step


def _view(max_requeues: int) -> DefragView:
    state = ClusterState([node("a", 8, topology="nvswitch-8")])
    big, small1, small2 = (
        job(name, num=gpus, duration=7200.0) for name, gpus in (("big", 4), ("s1", 2), ("s2", 2))
    )
    running = {}
    for jid, (j, gpus, start) in enumerate(
        [(big, (0, 1, 2, 3), 0.0), (small1, (4, 5), 2400.0), (small2, (6, 7), 2400.0)]
    ):
        state.allocate(j, Placement(0, gpus))
        running[jid] = RunningJob(j, Placement(0, gpus), start)
    waiting = job("wait", num=4, submit=3000.0)
    return DefragView(3600.0, state, running, [(3, waiting)], max_requeues)


def test_large_target_requeues_small_jobs_and_keeps_the_large_one() -> None:
    plan = make_step("planner-large").plan(_view(max_requeues=2))
    assert sorted(plan.requeue) == [1, 2]
    assert plan.place == {3: Placement(0, (4, 5, 6, 7))}


def test_requeue_cap_is_the_plans_victim_limit() -> None:
    plan = make_step("planner-large").plan(_view(max_requeues=1))
    assert plan.requeue == ()
    assert plan.place == {}


def test_drain_only_holds_the_block_and_requeues_nothing() -> None:
    # Every blocker ends within drain.max_wait_hours (2 h): the big job in 1 h, the small
    # ones in 1.7 h. The block that frees first is held for the waiting job; nobody is
    # requeued although the cap would allow two.
    plan = make_step("planner-drain").plan(_view(max_requeues=2))
    assert plan.requeue == ()
    assert plan.place == {}
    assert plan.hold == {3: Placement(0, (0, 1, 2, 3))}


def test_wait_counts_the_harm_but_never_holds() -> None:
    # planner-harm would hold the block that frees within the drain horizon; planner-wait
    # has no drains, so it either requeues or leaves the job to backfill's own plan.
    assert make_step("planner-harm").plan(_view(max_requeues=2)).hold
    plan = make_step("planner-wait").plan(_view(max_requeues=2))
    assert plan.hold == {}
    assert make_step("planner-wait", StepLimits(3)).name == "planner-wait"


def _eight_gpu_view() -> DefragView:
    # One 8-GPU node held by a 4-GPU job and two 2-GPU jobs, all with hours left (no drain
    # within the horizon); an 8-GPU job waits. A free 4-GPU node lets a victim restart at
    # once, so its wait after requeue does not outweigh the target's gain.
    state = ClusterState([node("a", 8, topology="nvswitch-8"), node("b", 4)])
    running = {}
    for jid, (name, gpus) in enumerate((("four", (0, 1, 2, 3)), ("s1", (4, 5)), ("s2", (6, 7)))):
        j = job(name, num=len(gpus), duration=36000.0)
        state.allocate(j, Placement(0, gpus))
        running[jid] = RunningJob(j, Placement(0, gpus), 1800.0)
    return DefragView(3600.0, state, running, [(3, job("eight", num=8, submit=100.0))], 3)


def test_big_lets_a_smaller_large_job_make_way_for_an_eight_gpu_job() -> None:
    # planner-gain never requeues a job of >= 4 GPUs, so the 8-GPU job has no plan;
    # planner-big may requeue the 4-GPU one (only whole-node jobs are kept).
    assert make_step("planner-gain").plan(_eight_gpu_view()).requeue == ()
    plan = make_step("planner-big", StepLimits(6)).plan(_eight_gpu_view())
    assert sorted(plan.requeue) == [0, 1, 2]
    assert plan.place == {3: Placement(0, tuple(range(8)))}


def test_hold_horizon_and_gain_without_holds() -> None:
    # The blockers end in 1 h and 1.7 h: within the default 2 h horizon the block is held
    # (drain-only), within half an hour it is not; planner-gain-wait never holds.
    assert make_step("planner-drain").plan(_view(max_requeues=2)).hold
    assert make_step("planner-drain", StepLimits(0, 0.5)).plan(_view(max_requeues=2)).hold == {}
    assert make_step("planner-gain-wait", StepLimits(6)).plan(_view(max_requeues=2)).hold == {}
    with pytest.raises(InputError, match="unknown defrag step 'planner-gain@6'"):
        make_step("planner-gain@6")
    with pytest.raises(InputError, match="'planner' takes no limits"):
        make_step("planner", StepLimits(6))


def test_queue_head_leaves_a_large_job_behind_others_alone() -> None:
    """Issue #41: a large job with higher-priority jobs ahead of it waits for its turn."""
    view = _view(max_requeues=2)
    ahead = [(9, job("small", num=1, submit=2900.0))]
    behind = DefragView(view.now, view.state, view.running, ahead + list(view.pending), 2)
    head1 = make_step("planner-large", StepLimits(queue_head=1))
    assert head1.plan(behind).place == {}
    assert make_step("planner-large", StepLimits(queue_head=2)).plan(behind).place
    # at the head of the queue it is a target as before
    assert head1.plan(view).place == {3: Placement(0, (4, 5, 6, 7))}
