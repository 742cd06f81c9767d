"""Live: accounting (slurmdbd) in the compose cluster, and what the Operator may do.

The cluster's slurmdbd entrypoint creates (docker/entrypoint.sh, docker/README.md):
QOS normal (priority 0) and prod (100); accounts research and prod (both allow QOS
normal,prod, default normal); users root, defrag, alice, bob, carol in research (default
account of everyone), root, bob, carol also in prod; defrag with AdminLevel=Operator.

Checked here: those objects; jobs of several users carry account and QOS into both
snapshots (and prod outranks normal); sacct reports gres/gpu in AllocTRES; and the
Operator matrix of docker/README.md "Privileges" through the cli writer run as ``defrag``.

Objects are named ``e2e-acct-<tag>`` and removed afterwards; jobs of other users and
other tests are never touched.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from live_cluster import (
    CLUSTER,
    cli_backend,
    cluster_is_up,
    ctld,
    dexec,
    has_accounting,
    rest_backend,
    sbatch,
    wait_running,
)

from infra import require
from slurm_defrag.domain.cluster import JobState
from slurm_defrag.slurm.failures import SlurmRejectedError
from slurm_defrag.slurm.port import NewReservation

pytestmark = pytest.mark.slurm

TAG = uuid.uuid4().hex[:6]
USERS = ("root", "defrag", "alice", "bob", "carol")


@pytest.fixture(scope="module", autouse=True)
def accounting() -> None:
    require(cluster_is_up(), "the compose Slurm cluster")
    require(has_accounting(), "accounting (slurmdbd) in the compose Slurm cluster")


@pytest.fixture
def jobs() -> Iterator[list[str]]:
    """Job ids a test submits; cancelled afterwards."""
    ids: list[str] = []
    yield ids
    if ids:
        ctld("scancel", *ids, check=False)


def sacctmgr(*args: str) -> list[list[str]]:
    out = ctld("sacctmgr", "-n", "-P", "show", *args)
    return [line.split("|") for line in out.splitlines() if line.strip()]


def test_qos_accounts_users_and_operator_exist() -> None:
    qos = {name: int(prio) for name, prio in sacctmgr("qos", "format=name,priority")}
    assert qos["prod"] > qos["normal"]
    assocs = {
        (acct, user): set(q.split(","))
        for acct, user, q in sacctmgr(
            "assoc", "where", f"cluster={CLUSTER}", "format=account,user,qos"
        )
        if user
    }
    for user in USERS:
        assert {"normal", "prod"} <= assocs[("research", user)], user
    assert {u for a, u in assocs if a == "prod"} == {"root", "bob", "carol"}
    users = {
        u: (acct, level)
        for u, acct, level in sacctmgr("user", "format=user,defaultaccount,adminlevel")
    }
    assert {u: users[u][0] for u in USERS} == dict.fromkeys(USERS, "research")
    assert users["defrag"][1] == "Operator"
    # every test user exists with the same uid in the Slurm containers
    for service in ("slurmctld", "slurmdbd", "node01"):
        ids = dexec(service, "id", "-u", "alice").stdout.strip()
        assert ids == "2001", service


def test_a_user_outside_an_account_is_refused() -> None:
    proc = dexec(
        "slurmctld",
        "sbatch",
        "--account=prod",
        "-J",
        f"e2e-acct-{TAG}-refused",
        "--wrap",
        "true",
        user="alice",
        check=False,
    )
    assert proc.returncode != 0
    assert "account" in proc.stderr.lower(), proc.stderr


def test_snapshot_jobs_carry_account_qos_and_priority(jobs: list[str]) -> None:
    """Pending (BeginTime) jobs of four users, read by both backends."""
    later = ("--begin=now+3600", "--gres=gpu:1")
    expected = {  # job id -> (user, account, qos)
        sbatch("-J", f"e2e-acct-{TAG}-root", *later): ("root", "research", "normal"),
        sbatch("-J", f"e2e-acct-{TAG}-alice", *later, user="alice"): (
            "alice",
            "research",
            "normal",
        ),
        sbatch("-J", f"e2e-acct-{TAG}-bob", "--account=prod", "--qos=prod", *later, user="bob"): (
            "bob",
            "prod",
            "prod",
        ),
        sbatch("-J", f"e2e-acct-{TAG}-carol", "--qos=prod", *later, user="carol"): (
            "carol",
            "research",
            "prod",
        ),
    }
    jobs.extend(expected)
    time.sleep(2)  # one priority calculation
    for snap in (cli_backend().snapshot(), rest_backend().snapshot()):
        by_id = snap.job_by_id
        for job_id, (user, account, qos) in expected.items():
            job = by_id[job_id]
            assert (job.user, job.account, job.qos) == (user, account, qos), snap.source
            assert job.state == JobState.PENDING
            assert job.reason == "BeginTime", (snap.source, job.reason)
        prod = [by_id[j].priority for j, e in expected.items() if e[2] == "prod"]
        normal = [by_id[j].priority for j, e in expected.items() if e[2] == "normal"]
        assert min(prod) > max(normal), (snap.source, prod, normal)
    for job_id, (_user, account, qos) in expected.items():  # what an admin reads
        assert f"Account={account} QOS={qos}" in ctld("scontrol", "show", "job", job_id)


def test_sacct_alloc_tres_has_gpus(jobs: list[str]) -> None:
    job = sbatch(
        "-J", f"e2e-acct-{TAG}-tres", "--gres=gpu:2", "-t", "2", user="carol", wrap="sleep 3"
    )
    jobs.append(job)
    deadline = time.monotonic() + 120
    row: list[str] = []
    while time.monotonic() < deadline:
        out = ctld("sacct", "-X", "-n", "-P", "-j", job, "-o", "user,account,qos,state,alloctres")
        row = out.strip().split("|") if out.strip() else []
        # Right after the cluster starts, slurmdbd may not have the QOS names yet and
        # sacct reads "Unknown" for a while (seen once in CI on 22.05): keep polling.
        if (
            row
            and row[3] in ("RUNNING", "COMPLETED")
            and "gres/gpu" in row[4]
            and row[2] != "Unknown"
        ):
            break
        time.sleep(2)
    assert row[:3] == ["carol", "research", "normal"], row
    tres = dict(t.split("=", 1) for t in row[4].split(","))
    assert tres["gres/gpu"] == "2", row
    typed = {k: v for k, v in tres.items() if k.startswith("gres/gpu:")}
    assert list(typed.values()) == ["2"], row  # gres/gpu:<model>=2 (AccountingStorageTRES)
    assert typed.keys() <= {"gres/gpu:a100", "gres/gpu:a100-80g", "gres/gpu:h100"}


def test_operator_privileges_through_the_cli_writer(jobs: list[str]) -> None:
    """docker/README.md "Privileges": what AdminLevel=Operator allows (22.05 and 24.11)."""
    op = cli_backend(user="defrag")
    job = sbatch("-J", f"e2e-acct-{TAG}-op", "--requeue", "--gres=gpu:1", user="alice")
    jobs.append(job)
    wait_running([job])
    # allowed: requeue another user's job, update it, create/delete reservations
    op.requeue(job, f"slurm-defrag:e2e-{TAG}")
    deadline = time.monotonic() + 30
    while (state := op.snapshot().job_by_id[job].state) != JobState.PENDING:
        assert time.monotonic() < deadline, f"requeued job {job} is {state}, not PENDING"
        time.sleep(1)
    # (Nice, not Comment: while slurm-plugins/job_submit.lua is installed, a Comment
    # update makes the hook rewrite AdminComment, which only an Admin may change)
    op.update_job(job, Nice="10")
    assert "Nice=10" in ctld("scontrol", "show", "job", job)
    resv = f"e2e-acct-{TAG}"
    node = next(n.name for n in op.snapshot().nodes if n.available)
    try:
        op.create_reservation(NewReservation(resv, [node], 600, users=["root"]))
        assert any(r.name == resv for r in op.snapshot().reservations)
    finally:
        op.delete_reservation(resv)
    assert all(r.name != resv for r in op.snapshot().reservations)
    # refused: node updates (drain, resume, weight) and AdminComment need AdminLevel=Admin
    weight = ctld("scontrol", "show", "node", node).split("Weight=")[1].split()[0]
    try:
        with pytest.raises(SlurmRejectedError, match="Invalid user id"):
            op.update_node(node, State="DRAIN", Reason=f"e2e-acct-{TAG}")
        with pytest.raises(SlurmRejectedError, match="Invalid user id"):
            op.update_node(node, Weight="7")
    finally:  # should the refusal ever go away, put the node back as it was
        if f"e2e-acct-{TAG}" in ctld("scontrol", "show", "node", node):
            ctld("scontrol", "update", f"NodeName={node}", "State=RESUME")
        ctld("scontrol", "update", f"NodeName={node}", f"Weight={weight}")
    with pytest.raises(SlurmRejectedError, match=r"(?i)permission denied"):
        op.update_job(job, AdminComment=f"e2e-acct-{TAG}")
    # an ordinary user may not requeue someone else's job
    with pytest.raises(SlurmRejectedError, match=r"(?i)permission denied"):
        cli_backend(user="bob").requeue(job, "e2e")
