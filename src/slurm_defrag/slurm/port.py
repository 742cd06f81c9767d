"""What slurm-defrag may read from and do to Slurm. Two small interfaces.

Readers return a whole :class:`ClusterSnapshot` in one call, so the loop never sees a
half-read cluster. Writers perform the actions a plan consists of; every method is
idempotent (doing it twice leaves the same state) and takes a ``reason`` that carries
``slurm-defrag:<plan id>`` so every change in Slurm is attributable.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from slurm_defrag.domain.cluster import ClusterSnapshot


@runtime_checkable
class SlurmReader(Protocol):
    name: str
    """Backend name recorded in the snapshot's ``source`` (cli, rest, pyslurm, fake)."""

    def snapshot(self) -> ClusterSnapshot:
        """Nodes, jobs (with per-node GPU indices), partitions, reservations, topology."""
        ...


@runtime_checkable
class SlurmWriter(Protocol):
    def create_reservation(
        self,
        name: str,
        nodes: Sequence[str],
        users: Sequence[str],
        accounts: Sequence[str],
        start: datetime | None,
        duration_s: int,
    ) -> None:
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
