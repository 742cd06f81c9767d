"""The fields a writer's ``update_job`` / ``update_node`` may set, in one table.

The port speaks ``scontrol``'s ``Key=Value``; the cli backend passes it on as is. slurmrestd
and pyslurm name each field their own way: both read the names here, and a field missing
from the table is refused with the same message by either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from slurm_defrag.slurm.failures import SlurmRejectedError


@dataclass(frozen=True)
class JobField:
    """One job field: its key in slurmrestd's ``job_desc_msg`` and pyslurm's
    ``JobSubmitDescription`` attribute."""

    rest: str
    pyslurm: str
    numeric: bool = False
    """slurmrestd (data_parser, v0.0.39+) takes it as a ``{"set", "number"}`` object."""


JOB_FIELDS: Final = {
    "Comment": JobField("comment", "comment"),
    "AdminComment": JobField("admin_comment", "admin_comment"),
    "ReservationName": JobField("reservation", "reservations"),
    "Priority": JobField("priority", "priority", numeric=True),
    "TimeLimit": JobField("time_limit", "time_limit", numeric=True),
    "StartTime": JobField("begin_time", "begin_time", numeric=True),
}
"""scontrol job field -> its names in the rest and pyslurm backends."""

NodeField = Literal["state", "reason", "weight"]

NODE_FIELDS: Final[dict[str, NodeField]] = {
    "state": "state",
    "reason": "reason",
    "weight": "weight",
}
"""scontrol node field, lower-cased -> the name slurmrestd and pyslurm both use."""


def job_field(key: str, job_id: str, backend: str) -> JobField:
    """The names of job field ``key``; refused when the backend cannot set it."""
    found = JOB_FIELDS.get(key)
    if found is None:
        raise SlurmRejectedError(
            f"Slurm rejected update of job {job_id}: field {key!r} is not supported by the "
            f"{backend} backend; supported: " + ", ".join(sorted(JOB_FIELDS))
        )
    return found


def node_field(key: str, node: str, backend: str) -> NodeField:
    """The name of node field ``key`` (any case); refused when the backend cannot set it."""
    found = NODE_FIELDS.get(key.lower())
    if found is None:
        raise SlurmRejectedError(
            f"Slurm rejected update of node {node}: field {key!r} is not supported by the "
            f"{backend} backend; supported: Reason, State, Weight"
        )
    return found
