"""Live (#40): nobody borrows a defrag reservation.

The service's reservation ``defrag-<plan id>`` lists the target's owner for the plan's TTL
(+300 s): without the hook that owner could start other jobs in it, on GPUs freed by
requeuing other people's jobs, while everyone else is kept off those nodes. With
job_submit.lua installed (rendered ``--service-user 2000``, the compose ``defrag``
account), here on a reservation made as the service makes one (whole node, the owner as
its only user, IGNORE_JOBS):

* the owner's ``sbatch --reservation=defrag-...`` is refused, with the hook's message;
* the owner's ``scontrol update job=... ReservationName=defrag-...`` is refused and the
  job stays out of the reservation; leaving a reservation (empty name) still passes;
* the service account's update of the same job passes (its hand-over), as does root's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from plugins.plugins_support import Installed

pytestmark = [pytest.mark.slurm, pytest.mark.newsuite]

OWNER = "alice"


@pytest.fixture
def reservation(installed: Installed) -> Iterator[str]:
    c = installed.cluster
    name = f"defrag-guard{uuid.uuid4().hex[:6]}"
    c.run(
        "scontrol",
        "create",
        "reservation",
        f"ReservationName={name}",
        "Nodes=node04",
        f"Users={OWNER}",
        "StartTime=now",
        "Duration=10",
        "Flags=IGNORE_JOBS",
    )
    try:
        yield name
    finally:
        c.run("scancel", "-u", OWNER, "-n", "defrag-plugin-test", check=False)
        c.run("scontrol", "delete", f"ReservationName={name}", check=False)


def as_user(installed: Installed, user: str, *argv: str) -> tuple[int, str, str]:
    proc = installed.cluster.run("runuser", "-u", user, "--", *argv, check=False)
    return proc.returncode, proc.stdout.strip(), proc.stderr.strip()


def held_job(installed: Installed, *opts: str) -> tuple[int, str, str]:
    rc, out, err = as_user(
        installed,
        OWNER,
        "sbatch",
        "--parsable",
        "-H",
        "-J",
        "defrag-plugin-test",
        "--chdir=/tmp",
        "-o",
        "/dev/null",
        "--gres=gpu:1",
        *opts,
        "--wrap",
        "true",
    )
    job = out.split(";")[0] if rc == 0 else ""
    if job:
        installed.cluster.created_jobs.append(job)
    return rc, job, err


def test_the_owner_cannot_submit_into_it(installed: Installed, reservation: str) -> None:
    rc, job, err = held_job(installed, f"--reservation={reservation}")
    assert rc != 0, f"accepted as job {job}"
    assert f"reservation {reservation} holds nodes for the one job" in err, err


def test_the_owner_cannot_move_a_job_into_it(installed: Installed, reservation: str) -> None:
    c = installed.cluster
    rc, job, err = held_job(installed)
    assert rc == 0, err
    rc, _, err = as_user(
        installed, OWNER, "scontrol", "update", f"JobId={job}", f"ReservationName={reservation}"
    )
    assert rc != 0, "the owner's update was accepted"
    assert c.job_field(job, "Reservation") in ("", "(null)")
    # leaving a reservation is never refused
    rc, _, err = as_user(installed, OWNER, "scontrol", "update", f"JobId={job}", "ReservationName=")
    assert rc == 0, err


@pytest.mark.parametrize("actor", ["defrag", "root"])
def test_the_service_hands_the_target_over(
    installed: Installed, reservation: str, actor: str
) -> None:
    c = installed.cluster
    rc, job, err = held_job(installed)
    assert rc == 0, err
    rc, _, err = as_user(
        installed, actor, "scontrol", "update", f"JobId={job}", f"ReservationName={reservation}"
    )
    assert rc == 0, err
    assert c.job_field(job, "Reservation") == reservation
