"""Drain-to-consolidate: waiting for blockers beats requeueing long-running work."""

from __future__ import annotations

from datetime import timedelta

from slurm_defrag.domain.cluster import ClusterSnapshot, GpuRequest, Job, JobState, Node
from slurm_defrag.domain.plan import ActionKind
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.policy.file import parse_policy
from slurm_defrag.synth import EPOCH


def _snapshot(limit_left_h: float) -> ClusterSnapshot:
    t = EPOCH
    node = Node(
        name="g1",
        partitions=("batch",),
        state=frozenset({"MIXED"}),
        gpu_model="h100",
        gpu_count=8,
        topology="nvswitch-8",
    )
    # 6 GPUs held by a job that ran 10 h (60 GPU-h to lose) and ends soon; the target takes
    # the whole 8 GPUs (a 6-GPU job is never requeued for fewer: the swap rule).
    blocker = Job(
        id="1",
        user="u",
        partition="batch",
        state=JobState.RUNNING,
        start_time=t - timedelta(hours=10),
        time_limit_s=int((10 + limit_left_h) * 3600),
        gpus={"g1": frozenset(range(6))},
    )
    target = Job(
        id="2",
        user="v",
        partition="batch",
        state=JobState.PENDING,
        reason="Resources",
        request=GpuRequest(gpus_per_node=8, nvlink=True),
    )
    return ClusterSnapshot(taken_at=t, nodes=(node,), jobs=(blocker, target))


def test_drain_when_blockers_end_soon() -> None:
    plan = make_plan(_snapshot(0.5), parse_policy({"version": 1}), ["2"])
    (t,) = plan.targets
    assert t.served
    assert t.mode == "drain"
    assert not plan.victims
    (p,) = t.placements
    assert p.blockers == ("1",)
    assert p.free_at == EPOCH + timedelta(hours=0.5)
    # idle while waiting: the 2 free GPUs for 0.5 h
    assert abs(p.idle_gpu_hours - 1.0) < 1e-6
    kinds = [a.kind for a in plan.actions]
    assert kinds == [
        ActionKind.DRAIN,
        ActionKind.RESERVE,
        ActionKind.WAIT_FREE,
        ActionKind.HAND_OVER,
        ActionKind.RESUME,
        ActionKind.RELEASE,
    ]
    assert plan.actions[2].expected_at == p.free_at


def test_requeue_when_the_wait_is_too_long() -> None:
    plan = make_plan(_snapshot(5), parse_policy({"version": 1}), ["2"])
    assert plan.targets[0].mode == "requeue"
    assert [v.job_id for v in plan.victims] == ["1"]


def test_drain_disabled() -> None:
    policy = parse_policy({"version": 1, "drain": {"enabled": False}})
    plan = make_plan(_snapshot(0.5), policy, ["2"])
    assert plan.targets[0].mode == "requeue"
