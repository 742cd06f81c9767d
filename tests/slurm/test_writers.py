"""Writers: the fake applies writes to its state; the cli writer sends safe argv lists."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from slurm_defrag.domain.cluster import ClusterSnapshot, JobState, NodeFlag
from slurm_defrag.slurm.backends import SlurmBackend
from slurm_defrag.slurm.cli_backend import CliSlurm
from slurm_defrag.slurm.connection import SlurmSettings
from slurm_defrag.slurm.failures import SlurmParseError, SlurmRejectedError
from slurm_defrag.slurm.fake import FakeSlurm
from slurm_defrag.slurm.parse.openapi import api_version
from slurm_defrag.slurm.port import WRITE_KINDS, NewReservation, SlurmReader, SlurmWriter
from slurm_defrag.slurm.pyslurm_adapter import PyslurmSlurm
from slurm_defrag.slurm.rest import writes_refused
from slurm_defrag.slurm.update_fields import JOB_FIELDS

NOW = datetime(2026, 11, 29, 15, 14, 13, tzinfo=UTC)


@pytest.fixture(params=[False, True], ids=["uncached", "cached"])
def fake(recordings: SimpleNamespace, request: pytest.FixtureRequest) -> FakeSlurm:
    # cached = the dry-run sandbox's mode: every write test must hold there too
    return FakeSlurm(
        recordings.rest("24.11").snapshot(), clock=lambda: NOW, cache_reads=request.param
    )


def test_every_backend_implements_both_ports(recordings: SimpleNamespace, fake: FakeSlurm) -> None:
    backends: list[SlurmBackend] = [
        recordings.cli("22.05"),
        recordings.rest("22.05"),
        recordings.pyslurm(),
        fake,
    ]
    for b in backends:
        assert isinstance(b, SlurmReader)
        assert isinstance(b, SlurmWriter)


def test_fake_requeue_frees_gpus_and_pends_with_request(fake: FakeSlurm) -> None:
    fake.requeue("8", "slurm-defrag:plan-1")
    snap = fake.snapshot()
    job = snap.job_by_id["8"]
    assert job.state == JobState.PENDING
    assert not job.gpus
    assert job.start_time is None
    assert job.request is not None
    assert (job.request.nodes, job.request.gpus_per_node) == (2, 2)
    assert snap.node_by_name["node05"].gpus_used == frozenset()
    assert snap.node_by_name["node06"].gpus_used == frozenset()
    assert snap.node_by_name["node01"].gpus_used == frozenset(range(5))  # untouched
    fake.requeue("8", "slurm-defrag:plan-1")  # idempotent
    assert fake.calls[-1] == ("requeue", "8", "slurm-defrag:plan-1")


def test_fake_requeue_refusals(fake: FakeSlurm, recordings: SimpleNamespace) -> None:
    with pytest.raises(SlurmRejectedError, match="Invalid job id"):
        fake.requeue("999", "r")
    snap = recordings.rest("24.11").snapshot()
    jobs = tuple(j.model_copy(update={"requeue": False}) if j.id == "1" else j for j in snap.jobs)
    no_requeue = FakeSlurm(snap.model_copy(update={"jobs": jobs}))
    with pytest.raises(SlurmRejectedError, match="presently disabled"):
        no_requeue.requeue("1", "r")


def test_fake_reservations(fake: FakeSlurm) -> None:
    fake.create_reservation(
        NewReservation("slurm-defrag-p1", ["node05", "node06"], 3600, users=["root"])
    )
    fake.create_reservation(
        NewReservation("slurm-defrag-p1", ["node06", "node05"], 3600, users=["root"])
    )
    snap = fake.snapshot()
    assert {r.name for r in snap.reservations} == {"defrag-demo", "slurm-defrag-p1"}
    assert snap.node_by_name["node05"].reservation == "slurm-defrag-p1"
    with pytest.raises(SlurmRejectedError, match="Duplicate reservation name"):
        fake.create_reservation(NewReservation("slurm-defrag-p1", ["node01"], 60, users=["root"]))
    fake.delete_reservation("slurm-defrag-p1")
    fake.delete_reservation("slurm-defrag-p1")  # absent is success
    snap = fake.snapshot()
    assert snap.node_by_name["node05"].reservation is None
    assert snap.node_by_name["node08"].reservation == "defrag-demo"
    fake.delete_reservation("defrag-demo")
    assert fake.snapshot().node_by_name["node08"].reservation is None


def test_fake_drain_resume_weight(fake: FakeSlurm) -> None:
    fake.update_node("node01", State="DRAIN", Reason="slurm-defrag:p1 defrag")
    node = fake.snapshot().node_by_name["node01"]
    assert NodeFlag.DRAIN in node.state
    assert node.reason == "slurm-defrag:p1 defrag"
    fake.update_node("node07", State="RESUME")
    node7 = fake.snapshot().node_by_name["node07"]
    assert not node7.drained
    assert node7.reason == ""
    fake.update_node("node02", Weight="50")
    assert fake.snapshot().node_by_name["node02"].weight == 50
    with pytest.raises(SlurmRejectedError, match="Invalid node name"):
        fake.update_node("node99", State="DRAIN")


def test_fake_update_job(fake: FakeSlurm) -> None:
    fake.update_job("9", AdminComment="defrag:nvlink=0", Priority="7")
    job = fake.snapshot().job_by_id["9"]
    assert (job.admin_comment, job.priority) == ("defrag:nvlink=0", 7)


def test_fake_cached_reads_equal_fresh_ones_after_every_write(
    recordings: SimpleNamespace,
) -> None:
    seed = recordings.rest("24.11").snapshot()
    cached = FakeSlurm(seed, clock=lambda: NOW, cache_reads=True)
    fresh = FakeSlurm(seed, clock=lambda: NOW)
    assert cached.snapshot() == fresh.snapshot()
    writes: list[tuple[str, tuple[object, ...], dict[str, str]]] = [
        (
            "create_reservation",
            (NewReservation("slurm-defrag-p1", ["node05", "node06"], 60, users=["root"]),),
            {},
        ),
        ("requeue", ("8", "slurm-defrag:plan-1"), {}),
        ("update_node", ("node05",), {"Weight": "7"}),
        ("update_job", ("9",), {"AdminComment": "defrag:nvlink=0"}),
        ("update_node", ("node01",), {"State": "DRAIN", "Reason": "x"}),
        ("delete_reservation", ("slurm-defrag-p1",), {}),
        ("delete_reservation", ("defrag-demo",), {}),
    ]
    for name, args, kwargs in writes:
        for backend in (cached, fresh):
            getattr(backend, name)(*args, **kwargs)
        assert cached.snapshot() == fresh.snapshot(), name


def test_fake_snapshot_round_trips(recordings: SimpleNamespace) -> None:
    seed: ClusterSnapshot = recordings.cli("22.05").snapshot()
    again = FakeSlurm(seed, clock=lambda: seed.taken_at).snapshot()
    assert again.model_copy(update={"source": seed.source}) == seed


class Recorder:
    def __init__(self, fail: dict[str, tuple[int, str]] | None = None) -> None:
        self.calls: list[list[str]] = []
        self.fail = fail or {}

    def __call__(self, argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        argv = list(argv)
        self.calls.append(argv)
        for prefix, (rc, err) in self.fail.items():
            if " ".join(argv).startswith(prefix):
                return subprocess.CompletedProcess(argv, rc, "", err)
        return subprocess.CompletedProcess(argv, 0, "", "")


def test_cli_writes_are_argv_lists_with_prefix() -> None:
    rec = Recorder()
    prefix = ["docker", "exec", "slurmdefrag-bookworm-slurmctld"]
    w = CliSlurm(SlurmSettings(command_prefix=prefix), runner=rec)
    w.create_reservation(
        NewReservation(
            "slurm-defrag-p1",
            ["node01", "node02"],
            5400,
            users=["root"],
            start=datetime(2026, 11, 29, 16, 0, tzinfo=UTC),
        )
    )
    w.update_node("node03", State="DRAIN", Reason="slurm-defrag:p1 free NVLink block; it's ok")
    w.update_job("12", Comment="x y")
    w.requeue("12", "slurm-defrag:p1")
    w.delete_reservation("slurm-defrag-p1")
    assert all(c[:3] == prefix for c in rec.calls)
    assert [c[3:] for c in rec.calls] == [
        [
            "scontrol",
            "create",
            "reservation",
            "ReservationName=slurm-defrag-p1",
            "Nodes=node01,node02",
            "StartTime=2026-11-29T16:00:00",
            "Duration=90",
            "Flags=IGNORE_JOBS",
            "Users=root",
        ],
        [
            "scontrol",
            "update",
            "NodeName=node03",
            "State=DRAIN",
            "Reason=slurm-defrag:p1 free NVLink block; it's ok",
        ],
        ["scontrol", "update", "JobId=12", "Comment=x y"],
        ["scontrol", "requeue", "12"],
        ["scontrol", "delete", "ReservationName=slurm-defrag-p1"],
    ]


def test_cli_write_refuses_field_names_that_are_not_fields() -> None:
    w = CliSlurm(SlurmSettings(), runner=Recorder())
    with pytest.raises(SlurmRejectedError, match="not a Slurm field name"):
        w.update_node("node01", **{"State=RESUME Reason": "x"})


def test_cli_delete_absent_reservation_is_success() -> None:
    rec = Recorder(
        {
            "scontrol delete": (1, "scontrol: error: Invalid reservation name specified"),
            "scontrol show reservation": (1, "Reservation slurm-defrag-p1 not found"),
        }
    )
    CliSlurm(SlurmSettings(), runner=rec).delete_reservation("slurm-defrag-p1")


def test_cli_requeue_rejected_by_slurm() -> None:
    error = "scontrol: error: Requested operation is presently disabled"
    rec = Recorder({"scontrol requeue": (1, error)})
    with pytest.raises(SlurmRejectedError, match="presently disabled"):
        CliSlurm(SlurmSettings(), runner=rec).requeue("5", "r")


def test_rest_cannot_requeue(recordings: SimpleNamespace) -> None:
    with pytest.raises(SlurmRejectedError, match="no requeue endpoint"):
        recordings.rest("24.11").requeue("1", "r")


def test_each_backend_says_what_it_cannot_write(
    recordings: SimpleNamespace, fake: FakeSlurm
) -> None:
    # asked of the backend: callers (doctor) never look at its type or API version
    assert recordings.cli("24.11").cannot_write() == {}
    assert recordings.pyslurm().cannot_write() == {}
    assert fake.cannot_write() == {}
    assert set(recordings.rest("24.11").cannot_write()) == {"requeue", "reservation"}
    assert set(recordings.rest("22.05").cannot_write()) == set(WRITE_KINDS) - {"hand-over"}


def test_rest_write_refusals_compare_versions_as_numbers() -> None:
    # as strings "v0.0.100" < "v0.0.43" and "v0.0.9" > "v0.0.43": both would be wrong
    assert "v0.0.100" < "v0.0.43"
    assert "v0.0.9" > "v0.0.43"
    assert "reservation" not in writes_refused("v0.0.100")
    assert "reservation" in writes_refused("v0.0.9")
    assert "drain" in writes_refused("v0.0.9")
    assert set(writes_refused("v0.0.43")) == {"requeue"}
    assert set(writes_refused("v1.0.0")) == {"requeue"}
    with pytest.raises(SlurmParseError, match="not a slurmrestd API version"):
        writes_refused("0.0.43")


def test_a_pinned_api_version_is_checked_at_load() -> None:
    assert SlurmSettings(rest_api_version="v0.0.40").rest_api_version == "v0.0.40"
    for bad in ("0.0.40", "v0.0", "latest"):
        with pytest.raises(ValidationError, match="rest_api_version"):
            SlurmSettings(rest_api_version=bad)


def test_api_versions_order_as_numbers() -> None:
    assert api_version("v0.0.40") > api_version("v0.0.9")
    assert "v0.0.40" < "v0.0.9"  # what comparing the strings gets wrong
    assert sorted(["v0.0.9", "v0.0.40", "v0.0.38", "v1.0.0"], key=api_version) == [
        "v0.0.9",
        "v0.0.38",
        "v0.0.40",
        "v1.0.0",
    ]
    for bad in ("", "v0.0", "v0.0.x", "0.0.40", "v0.0.40 ", "v0.0.12345"):
        with pytest.raises(SlurmParseError):
            api_version(bad)


def test_rest_and_pyslurm_refuse_a_job_field_alike(recordings: SimpleNamespace) -> None:
    for backend in (recordings.rest("24.11"), recordings.pyslurm()):
        with pytest.raises(SlurmRejectedError) as caught:
            backend.update_job("1", Nice="5")
        assert str(caught.value) == (
            f"Slurm rejected update of job 1: field 'Nice' is not supported by the "
            f"{backend.name} backend; supported: " + ", ".join(sorted(JOB_FIELDS))
        )


def test_pyslurm_writes_use_the_25_11_api(recordings: SimpleNamespace) -> None:
    calls: list[tuple[str, ...]] = []

    class Job:
        def __init__(self, job_id: int) -> None:
            self.id = job_id

        def requeue(self) -> None:
            calls.append(("requeue", str(self.id)))

        def modify(self, desc: object) -> None:
            calls.append(("modify", str(self.id), repr(vars(desc))))

    class Node:
        def __init__(self, name: str | None = None, **changes: object) -> None:
            self.name, self.changes = name, changes

        def modify(self, diff: Node) -> None:
            calls.append(("node", str(self.name), repr(diff.changes)))

    module = recordings.pyslurm_module()
    module.Job, module.Node = Job, Node
    module.JobSubmitDescription = lambda **kw: SimpleNamespace(**kw)
    backend = recordings.pyslurm()
    backend._module = module
    backend.requeue("8", "r")
    backend.update_job("9", AdminComment="defrag:nvlink=1")
    backend.update_node("node07", State="RESUME")
    assert calls == [
        ("requeue", "8"),
        ("modify", "9", "{'admin_comment': 'defrag:nvlink=1'}"),
        ("node", "node07", "{'state': 'RESUME'}"),
    ]


def test_pyslurm_clears_a_field_through_scontrol(recordings: SimpleNamespace) -> None:
    """pyslurm turns "" into NULL ("unchanged"): detaching a job from its reservation would
    do nothing (live on 25.11.7 the delete then failed "in use"). scontrol does it."""
    modified: list[object] = []
    module = recordings.pyslurm_module()
    module.Job = lambda job_id: SimpleNamespace(modify=modified.append)
    module.JobSubmitDescription = lambda **kw: SimpleNamespace(**kw)
    rec = Recorder()
    backend = PyslurmSlurm(
        SlurmSettings(backend="pyslurm"),
        module=module,
        clearing_writer=CliSlurm(SlurmSettings(), runner=rec),
    )
    backend.update_job("9", ReservationName="")
    backend.update_job("9", ReservationName="defrag-1")
    assert rec.calls == [["scontrol", "update", "JobId=9", "ReservationName="]]
    assert [vars(d) for d in modified] == [{"reservations": "defrag-1"}]
