"""What slurm-defrag may read from and do to Slurm. Two small interfaces.

Readers return a whole :class:`ClusterSnapshot` in one call, so the loop never sees a
half-read cluster. Writers perform the actions a plan consists of; every method is
idempotent (doing it twice leaves the same state) and takes a ``reason`` that carries
``slurm-defrag:<plan id>`` so every change in Slurm is attributable.

A writer that cannot make some kind of write at all (slurmrestd has no requeue endpoint)
says so in :meth:`SlurmWriter.cannot_write`: callers ask the writer, never its type or
version. Classes that subclass :class:`SlurmWriter` inherit "every write" and need spell
out only the methods they have; :class:`ForwardingWriter` is the base of the decorators,
which change how a write is carried, not which.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Final, Literal, NamedTuple, Protocol, runtime_checkable

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.slurm import ids


@runtime_checkable
class SlurmReader(Protocol):
    name: str
    """Backend name recorded in the snapshot's ``source`` (cli, rest, pyslurm, fake)."""

    def snapshot(self) -> ClusterSnapshot:
        """Nodes, jobs (with per-node GPU indices), partitions, reservations, topology."""
        ...


WriteKind = Literal["requeue", "reservation", "hand-over", "drain", "packing"]
"""The kinds of write a plan is made of: requeue a job, create/delete a reservation, move
the target job into it, drain/resume a node, set a node's Weight (packing)."""

WRITE_KINDS: Final[tuple[WriteKind, ...]] = (
    "requeue",
    "reservation",
    "hand-over",
    "drain",
    "packing",
)


class NewReservation(NamedTuple):
    """What :meth:`SlurmWriter.create_reservation` makes: an IGNORE_JOBS reservation of
    whole nodes, for ``users`` and ``accounts``, from ``start`` (None: now)."""

    name: str
    nodes: Sequence[str]
    duration_s: int
    users: Sequence[str] = ()
    accounts: Sequence[str] = ()
    start: datetime | None = None

    def checked(self) -> NewReservation:
        """The same reservation with its name, nodes, users and accounts checked the way
        every writer checks them before passing them on (:mod:`.ids`)."""
        return self._replace(
            name=ids.reservation_name(self.name),
            nodes=ids.node_names(self.nodes),
            users=ids.principals(self.users, "user"),
            accounts=ids.principals(self.accounts, "account"),
        )


@runtime_checkable
class SlurmWriter(Protocol):
    def create_reservation(self, r: NewReservation) -> None:
        """Create (or leave in place, if identical) an IGNORE_JOBS reservation."""
        ...

    def delete_reservation(self, name: str) -> None:
        """Remove a reservation; absent is success."""
        ...

    def requeue(self, job_id: str, reason: str) -> None:
        """Requeue a running job (it returns to PENDING and runs again later)."""
        ...

    def update_job(self, job_id: str, **fields: str) -> None:
        """``scontrol update jobid=... Key=Value``: e.g. ReservationName, StartTime, Comment."""
        ...

    def update_node(self, node: str, **fields: str) -> None:
        """``scontrol update nodename=... Key=Value``: State=DRAIN/RESUME + Reason, Weight."""
        ...

    def cannot_write(self) -> Mapping[WriteKind, str]:
        """The kinds of write this writer can never make, whatever the account's rights,
        each with why (``"requeue jobs (slurmrestd has no requeue endpoint)"``). Empty: it
        makes every kind; what a subclass inherits."""
        return {}


class ForwardingWriter(SlurmWriter):
    """A writer decorator: every write goes to ``inner`` through :meth:`_forward`, the one
    method a decorator overrides to observe or record; what ``inner`` cannot write, this
    cannot either."""

    def __init__(self, inner: SlurmWriter) -> None:
        self.inner = inner

    def _forward(self, method: str, /, *args: object, **fields: str) -> None:
        getattr(self.inner, method)(*args, **fields)

    def create_reservation(self, r: NewReservation) -> None:
        self._forward("create_reservation", r)

    def delete_reservation(self, name: str) -> None:
        self._forward("delete_reservation", name)

    def requeue(self, job_id: str, reason: str) -> None:
        self._forward("requeue", job_id, reason)

    def update_job(self, job_id: str, **fields: str) -> None:
        self._forward("update_job", job_id, **fields)

    def update_node(self, node: str, **fields: str) -> None:
        self._forward("update_node", node, **fields)

    def cannot_write(self) -> Mapping[WriteKind, str]:
        return self.inner.cannot_write()
