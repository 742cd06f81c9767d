"""The Slurm port on the simulated cluster: each writer call takes effect there, the way
scontrol's does in slurmctld, and the service cannot tell it from another backend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from service_helpers import open_store
from slurm_defrag import wiring
from slurm_defrag.demo import scenario
from slurm_defrag.demo.backend import SimSlurm
from slurm_defrag.domain.cluster import JobState
from slurm_defrag.service.settings import ServiceSettings
from slurm_defrag.sim.live import REQUEUE_DELAY_S, LiveCluster
from slurm_defrag.sim.model import JobSpec, NodeSpec
from slurm_defrag.slurm.backends import SlurmBackend
from slurm_defrag.slurm.failures import SlurmRejectedError
from slurm_defrag.slurm.port import NewReservation, SlurmReader, SlurmWriter

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def spec(gpus: int, user: str = "u", submit: float = 0.0, duration: float = 3600) -> JobSpec:
    return JobSpec(
        name=f"j{gpus}",
        cpu_milli=0,
        memory_mib=0,
        num_gpu=gpus,
        gpu_milli=1000,
        submit=submit,
        duration=duration,
        nvlink=gpus > 1,
        user=user,
        account="acct",
    )


@pytest.fixture
def sim() -> SimSlurm:
    """node a: job 1 holds GPUs 0-1, job 2 GPUs 2-3; node b: job 3 holds all four; job 4
    (4 GPUs, user t) waits."""
    nodes = [
        NodeSpec(name=n, cpu_milli=64_000, memory_mib=1 << 20, gpus=4, model="a100",
                 topology="nvswitch-4")
        for n in ("a", "b")
    ]  # fmt: skip
    c = LiveCluster(nodes, EPOCH)
    for jid, gpus, user in (("1", 2, "u"), ("2", 2, "v"), ("3", 4, "w"), ("4", 4, "t")):
        c.submit(jid, spec(gpus, user))
    c.advance(600)
    return SimSlurm(c)


def test_it_is_a_backend_of_the_slurm_port(sim: SimSlurm) -> None:
    assert isinstance(sim, SlurmReader)
    assert isinstance(sim, SlurmWriter)
    backend: SlurmBackend = sim  # mypy checks the full protocol
    snap = backend.snapshot()
    assert snap.source == "simulator"
    assert snap.taken_at == EPOCH + timedelta(seconds=600)
    assert snap.job_by_id["4"].state == JobState.PENDING


def test_the_plan_protocol_in_the_simulated_cluster(sim: SimSlurm) -> None:
    """What the executor issues for a requeue plan, call by call: reserve, requeue,
    hand over, and, once the target runs, detach and delete."""
    c = sim.cluster
    sim.create_reservation(NewReservation("defrag-p1", ["a"], 1200, users=["t"]))
    assert sim.snapshot().node_by_name["a"].reservation == "defrag-p1"
    sim.requeue("1", "slurm-defrag:p1 frees GPUs for job 4")
    sim.requeue("2", "slurm-defrag:p1 frees GPUs for job 4")
    snap = sim.snapshot()
    assert snap.job_by_id["1"].state == snap.job_by_id["2"].state == JobState.PENDING
    assert snap.node_by_name["a"].gpus_used == frozenset()
    sim.update_job("4", ReservationName="defrag-p1")
    c.advance(660)
    snap = sim.snapshot()
    assert snap.job_by_id["4"].gpus == {"a": frozenset({0, 1, 2, 3})}  # the freed block
    # the victims wait: their BeginTime, then the reserved node is not theirs
    c.advance(600 + REQUEUE_DELAY_S + 1)
    assert c.jobs["1"].state == JobState.PENDING
    with pytest.raises(SlurmRejectedError, match="Reservation request busy"):
        sim.delete_reservation("defrag-p1")
    sim.update_job("4", ReservationName="")
    sim.delete_reservation("defrag-p1")
    sim.delete_reservation("defrag-p1")  # absent: success
    assert sim.snapshot().reservations == ()
    assert c.jobs["4"].started_in == "defrag-p1"
    assert [call[0] for call in sim.calls] == [
        "create_reservation", "requeue", "requeue", "update_job",
        "delete_reservation", "update_job", "delete_reservation", "delete_reservation",
    ]  # fmt: skip


def test_node_updates(sim: SimSlurm) -> None:
    sim.update_node("a", State="DRAIN", Reason="slurm-defrag:p2 consolidate")
    node = sim.snapshot().node_by_name["a"]
    assert node.drained
    assert node.reason == "slurm-defrag:p2 consolidate"
    sim.update_node("a", State="RESUME")
    assert not sim.snapshot().node_by_name["a"].drained
    sim.update_node("b", Weight="4097")
    sim.update_node("b", AvailableFeatures="x,defrag_fit4", ActiveFeatures="x,defrag_fit4")
    node = sim.snapshot().node_by_name["b"]
    assert node.weight == 4097
    assert node.features == ("defrag_fit4", "x")
    with pytest.raises(SlurmRejectedError, match="Invalid node state"):
        sim.update_node("a", State="DOWN")
    with pytest.raises(SlurmRejectedError, match="Invalid node name"):
        sim.update_node("zz", Weight="1")
    with pytest.raises(SlurmRejectedError, match="does not model Gres="):
        sim.update_node("a", Gres="gpu:8")


def test_job_updates(sim: SimSlurm) -> None:
    sim.update_job("4", Priority="0")
    snap = sim.snapshot().job_by_id["4"]
    assert (snap.reason, snap.priority) == ("JobHeldAdmin", 0)
    sim.update_job("4", Priority="7")
    assert sim.snapshot().job_by_id["4"].priority == 7
    sim.update_job("4", Comment="hello", AdminComment="defrag:protect")
    snap = sim.snapshot().job_by_id["4"]
    assert (snap.comment, snap.admin_comment) == ("hello", "defrag:protect")
    sim.update_job("4", StartTime="now+300")
    sim.requeue("3", "frees node b")
    sim.update_job("3", Priority="0")  # held: node b stays free for job 4
    sim.cluster.advance(899)
    assert sim.cluster.jobs["4"].state == JobState.PENDING
    sim.cluster.advance(900)
    assert sim.cluster.jobs["4"].state == JobState.RUNNING
    with pytest.raises(SlurmRejectedError, match="Requested reservation is invalid"):
        sim.update_job("1", ReservationName="nope")
    with pytest.raises(SlurmRejectedError, match="does not model TimeLimit="):
        sim.update_job("1", TimeLimit="10")
    with pytest.raises(SlurmRejectedError, match="nothing to update"):
        sim.update_job("1")


def test_refusals_and_ids_are_those_of_the_real_writers(sim: SimSlurm) -> None:
    with pytest.raises(SlurmRejectedError, match="refused job id"):
        sim.requeue("1,2", "two jobs at once")
    with pytest.raises(SlurmRejectedError, match="refused node name"):
        sim.create_reservation(NewReservation("r", ["a,b"], 60, users=["t"]))
    with pytest.raises(SlurmRejectedError, match="Invalid job id"):
        sim.requeue("99", "no such job")
    sim.cluster.jobs["3"].requeue = False
    with pytest.raises(SlurmRejectedError, match="presently disabled"):
        sim.requeue("3", "Requeue=0")
    sim.create_reservation(NewReservation("r", ["a"], 60, users=["t"]))
    with pytest.raises(SlurmRejectedError, match="Duplicate reservation name"):
        sim.create_reservation(NewReservation("r", ["b"], 60, users=["t"]))
    with pytest.raises(SlurmRejectedError, match="Requested nodes are busy"):
        sim.create_reservation(NewReservation("r2", ["a"], 60, users=["t"]))


def test_the_composition_root_runs_the_cycle_on_the_backend_and_clock_it_is_given(
    tmp_path: Path,
) -> None:
    """wiring.build with the simulated cluster: the serve cycle, in enforce, applies a plan
    on it at the simulated time (the demo's first cycles, without the driver)."""
    open_store(tmp_path / "d.db").close()
    cluster = scenario.build(0, 3600.0, EPOCH)
    sim = SimSlurm(cluster)
    settings = ServiceSettings(
        mode="enforce",
        db_url=f"sqlite:///{tmp_path / 'd.db'}",
        kill_switch_file=tmp_path / "STOP",
        http_port=0,
    )
    service, store = wiring.build(settings, backend=sim, clock=cluster.clock)
    try:
        cluster.advance(0)
        first = service.cycle.run()
        assert first.outcome == "planned", first
        assert first.at == EPOCH
        (pid,) = first.plans
        for k in range(1, 6):  # its targets one after the other, a cycle a minute
            cluster.advance(60 * k)
            report = service.cycle.run()
            assert report.at == EPOCH + timedelta(minutes=k)
            if report.plans.get(pid) != "applying":
                break
        assert report.plans == {pid: "done"}
    finally:
        service.lease.release()
        store.close()
    kinds = [c[0] for c in sim.calls]
    assert kinds[0] == "create_reservation"
    assert "requeue" in kinds
    assert kinds[-1] == "delete_reservation"
    helped = [j for j in cluster.jobs.values() if j.started_in.startswith("defrag-")]
    assert helped
    assert cluster.reservations == {}
