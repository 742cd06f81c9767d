"""The ``scontrol`` command line of each write, built in one place.

The cli backend runs these argv lists; the actuator's audit log records them for every
backend (the command an operator would type to do the same by hand). Values are taken as
given: the writers check ids and names (:mod:`.ids`) before they get here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Final

from slurm_defrag.slurm.port import NewReservation


def slurm_time(t: datetime) -> str:
    """A time as ``scontrol`` reads it: UTC, which the command runner sets as Slurm's TZ."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def create_reservation(r: NewReservation) -> list[str]:
    name, nodes, duration_s, users, accounts, start = r
    argv = [
        "scontrol",
        "create",
        "reservation",
        f"ReservationName={name}",
        f"Nodes={','.join(nodes)}",
        "StartTime=" + ("now" if start is None else slurm_time(start)),
        f"Duration={max(1, math.ceil(duration_s / 60))}",
        "Flags=IGNORE_JOBS",
    ]
    if users:
        argv.append(f"Users={','.join(users)}")
    if accounts:
        argv.append(f"Accounts={','.join(accounts)}")
    return argv


def delete_reservation(name: str) -> list[str]:
    return ["scontrol", "delete", f"ReservationName={name}"]


def requeue(job_id: str, reason: str) -> list[str]:
    """``scontrol requeue`` takes no reason: the caller logs or records it beside."""
    return ["scontrol", "requeue", job_id]


def update_job(job_id: str, **fields: str) -> list[str]:
    return ["scontrol", "update", f"JobId={job_id}", *(f"{k}={v}" for k, v in fields.items())]


def update_node(node: str, **fields: str) -> list[str]:
    return ["scontrol", "update", f"NodeName={node}", *(f"{k}={v}" for k, v in fields.items())]


BY_METHOD: Final[Mapping[str, Callable[..., list[str]]]] = {
    "create_reservation": create_reservation,
    "delete_reservation": delete_reservation,
    "requeue": requeue,
    "update_job": update_job,
    "update_node": update_node,
}
"""The argv builder of each :class:`~.port.SlurmWriter` method, by the method's name."""
