"""Drain-to-consolidate plans through the executor (FakeSlurm + SQLite).

One H100 node: job 1 holds GPUs 0-5 and ends in 30 min, job 2 waits for a 4-GPU block.
The planner drains the node instead of requeueing 1 (tests/planner/test_planner_drain.py).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from service_helpers import FakeClock, slurm_schedules
from slurm_defrag.actuator.audit import AuditingWriter
from slurm_defrag.actuator.executor import Channel, Executor, Safety
from slurm_defrag.actuator.killswitch import KillSwitch
from slurm_defrag.domain.cluster import ClusterSnapshot, GpuRequest, Job, JobState, Node, NodeFlag
from slurm_defrag.domain.plan import Plan
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.policy.file import parse_policy
from slurm_defrag.policy.limits import InMemoryPreemptionHistory
from slurm_defrag.service.loop import Cycle, CycleDeps, CycleRules
from slurm_defrag.slurm.failures import SlurmRejectedError
from slurm_defrag.slurm.fake import FakeSlurm
from slurm_defrag.store.database import Store
from slurm_defrag.store.lease import Lease
from slurm_defrag.store.plans import Plans
from slurm_defrag.store.repo import Repository
from slurm_defrag.synth import EPOCH


def _snapshot() -> ClusterSnapshot:
    node = Node(
        name="g1",
        partitions=("batch",),
        state=frozenset({"MIXED"}),
        gpu_model="h100",
        gpu_count=8,
        topology="nvswitch-8",
    )
    blocker = Job(
        id="1",
        user="u",
        partition="batch",
        state=JobState.RUNNING,
        start_time=EPOCH - timedelta(hours=10),
        time_limit_s=int(10.5 * 3600),
        gpus={"g1": frozenset(range(6))},
    )
    target = Job(
        id="2",
        user="v",
        partition="batch",
        state=JobState.PENDING,
        reason="Resources",
        request=GpuRequest(gpus_per_node=4, nvlink=True),
    )
    return ClusterSnapshot(taken_at=EPOCH, nodes=(node,), jobs=(blocker, target))


@pytest.fixture
def drain_fake(clock: FakeClock) -> FakeSlurm:
    return FakeSlurm(_snapshot(), clock=clock)


def _executor(store: Store, fake: FakeSlurm, clock: FakeClock, ttl_s: float = 7200) -> Executor:
    plans = Plans(store.engine)
    return Executor(
        Channel(fake, AuditingWriter(fake, plans, dry_run=False), plans, "enforce"),
        Safety(parse_policy({"version": 1}), ttl_s, InMemoryPreemptionHistory()),
        clock=clock,
    )


def _blocker_ends(fake: FakeSlurm) -> None:
    fake.jobs["1"].update(state=JobState.COMPLETED, gpus={})
    fake.nodes["g1"]["gpus_used"] = []


def _admit(
    store: Store, fake: FakeSlurm, clock: FakeClock, ttl_s: float = 7200
) -> tuple[Executor, int, Plan]:
    plan = make_plan(fake.snapshot(), parse_policy({"version": 1}), ["2"])
    assert plan.targets[0].mode == "drain"
    ex = _executor(store, fake, clock, ttl_s)
    pid = ex.admit(plan)
    assert pid is not None
    return ex, pid, plan


def test_drain_then_resume_when_handed_over(
    store: Store, drain_fake: FakeSlurm, clock: FakeClock
) -> None:
    fake = drain_fake
    ex, pid, plan = _admit(store, fake, clock)
    assert ex.advance(pid) == "applying"
    node = fake.nodes["g1"]
    assert NodeFlag.DRAIN in node["state"]
    assert node["reason"].startswith(f"slurm-defrag:{plan.plan_id}")
    assert fake.jobs["1"]["state"] == JobState.RUNNING  # drained, not requeued
    clock.tick(1800)
    _blocker_ends(fake)
    assert ex.advance(pid) == "applying"  # handed over, node resumed, waiting for the start
    assert NodeFlag.DRAIN not in fake.nodes["g1"]["state"]
    assert slurm_schedules(fake, plan)
    assert ex.advance(pid) == "done"
    assert not fake.reservations
    assert [(s.action, s.state) for s in Plans(store.engine).steps(pid)] == [
        ("drain", "done"),
        ("reserve", "done"),
        ("wait-free", "done"),
        ("hand-over", "done"),
        ("resume", "done"),
        ("release", "done"),
    ]


def test_ttl_resumes_our_drain(store: Store, drain_fake: FakeSlurm, clock: FakeClock) -> None:
    ex, pid, _ = _admit(store, drain_fake, clock, ttl_s=600)
    ex.advance(pid)
    clock.tick(601)
    assert ex.advance(pid) == "aborted"
    assert NodeFlag.DRAIN not in drain_fake.nodes["g1"]["state"]
    assert not drain_fake.reservations


def test_rollback_leaves_an_admins_drain_alone(
    store: Store, drain_fake: FakeSlurm, clock: FakeClock, tmp_path: Path
) -> None:
    ex, pid, _ = _admit(store, drain_fake, clock, ttl_s=600)
    ex.advance(pid)
    # An admin drains the node for maintenance meanwhile (their reason replaces ours).
    drain_fake.update_node("g1", State="DRAIN", Reason="bad DIMM")
    clock.tick(601)
    assert ex.advance(pid) == "aborted"
    assert NodeFlag.DRAIN in drain_fake.nodes["g1"]["state"]
    assert drain_fake.nodes["g1"]["reason"] == "bad DIMM"


class _OperatorSlurm(FakeSlurm):
    """Slurm as the service's Operator account sees it: node updates refused, as measured
    on 22.05 and 24.11 (docker/README.md "Privileges")."""

    def update_node(self, node: str, **fields: str) -> None:
        self.calls.append(("update_node", node, *(f"{k}={v}" for k, v in fields.items())))
        raise SlurmRejectedError(
            f"Slurm rejected scontrol update nodename={node}: slurm_update error: Invalid user id"
        )


def test_a_drain_refused_for_want_of_rights_turns_drain_plans_off_not_every_cycle(
    store: Store, clock: FakeClock, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # two nodes, each with 2 GPUs free: 4 free, no 4-GPU block, so job 2 is falsely starved
    one = _snapshot()
    node2 = one.nodes[0].model_copy(update={"name": "g2"})
    blocker2 = one.jobs[0].model_copy(update={"id": "3", "gpus": {"g2": frozenset(range(6))}})
    both = one.model_copy(update={"nodes": (*one.nodes, node2), "jobs": (*one.jobs, blocker2)})
    slurm = _OperatorSlurm(both, clock=clock)
    cycle = Cycle(
        CycleDeps(
            slurm, slurm, Repository(store), Lease(store, "t:1", ttl_s=30),
            KillSwitch(tmp_path / "STOP"),
        ),
        CycleRules("enforce", parse_policy({"version": 1}), 7200),
        clock=clock,
    )  # fmt: skip
    first = cycle.run()
    assert first.outcome == "planned", first.detail
    assert list(first.plans.values()) == ["aborted"]  # rolled back
    assert "drain plans off until the service restarts" in caplog.text
    assert "Invalid user id" in caplog.text
    assert not cycle.policy.drain.enabled
    tries = len([c for c in slurm.calls if c[0] == "update_node"])
    for _ in range(3):
        clock.tick(60)
        report = cycle.run()
        assert report.outcome != "planned", report  # the same drain is not tried again
    assert len([c for c in slurm.calls if c[0] == "update_node"]) == tries
    assert caplog.text.count("drain plans off") == 1
