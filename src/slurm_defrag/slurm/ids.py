"""Ids and names checked before they reach a Slurm command line, URL or RPC.

Every writer (cli, rest, pyslurm, fake) passes job ids, node names, reservation names and
the users/accounts of a reservation through these functions first. The values come from
Slurm's own output, which job owners partly control, so a value that is not exactly an id
is refused rather than passed on: ``scontrol requeue 8,1`` requeues *two* jobs (scontrol
takes a comma-separated job list), ``NodeName=node01,node02`` updates two nodes, a ``/``
or ``?`` in a slurmrestd path addresses another endpoint.

Job ids: what ``scontrol requeue`` / ``update JobId=`` accept for *one* job and what the
readers produce (:func:`slurm_defrag.slurm.parse.mapping.job_id`):

* ``123`` - a job (``job_id``, at most 10 digits: Slurm ids are uint32);
* ``123_4`` - one array task (``array_job_id`` ``_`` ``array_task_id``);
* ``123+1`` - one heterogeneous job component (``het_job_id`` ``+`` ``het_job_offset``).

``123_[1-3]`` (several array tasks), lists, ``123.batch`` (steps) and anything with
another character are refused. Only ASCII digits count: ``str.isdigit`` accepts ``²``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from slurm_defrag.slurm.failures import SlurmRejectedError

_JOB_ID = re.compile(r"[1-9][0-9]{0,9}(?:_[0-9]{1,10}|\+[0-9]{1,10})?", re.ASCII)
_NUMERIC_JOB_ID = re.compile(r"[1-9][0-9]{0,9}", re.ASCII)
# Slurm node names are host names (NodeName=, letters, digits, '-', '.', '_'); reservation
# names are ours (slurm-defrag-<plan>) or an admin's; users/accounts are Unix/accounting
# names. None may contain ',', '=', whitespace, brackets or anything scontrol would read as
# a second value.
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}", re.ASCII)
_PRINCIPAL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@\-]{0,127}", re.ASCII)


def job_id(value: str) -> str:
    """``value`` if it names exactly one job (``123``, ``123_4``, ``123+1``), else refuse."""
    if isinstance(value, str) and _JOB_ID.fullmatch(value):
        return value
    raise SlurmRejectedError(
        f"refused job id {value!r}: not a single Slurm job id (123, 123_4 or 123+1)"
    )


def numeric_job_id(value: str) -> int:
    """A plain ``123`` as an int (the unique ``job_id``; pyslurm's ``Job(id)``)."""
    if isinstance(value, str) and _NUMERIC_JOB_ID.fullmatch(value):
        return int(value)
    raise SlurmRejectedError(f"refused job id {value!r}: not a plain numeric Slurm job id")


def node_name(value: str) -> str:
    return _checked(value, _NAME, "node name")


def reservation_name(value: str) -> str:
    return _checked(value, _NAME, "reservation name")


def node_names(values: Iterable[str]) -> list[str]:
    out = [node_name(v) for v in values]
    if not out:
        raise SlurmRejectedError("refused reservation: no nodes given")
    return out


def principals(values: Iterable[str], what: str) -> list[str]:
    """Users or accounts of a reservation (``what`` names which, for the message)."""
    return [_checked(v, _PRINCIPAL, what) for v in values]


def _checked(value: str, pattern: re.Pattern[str], what: str) -> str:
    if isinstance(value, str) and pattern.fullmatch(value):
        return value
    raise SlurmRejectedError(
        f"refused {what} {value!r}: only letters, digits and . _ - are allowed"
    )
