"""Where ``slurm-defrag top`` reads its frames: a snapshot file, the live cluster, a database.

A source is read again at every refresh. The snapshot comes from exactly one place (file,
live Slurm backend, or the database's stored history); plans in progress only ever come
from the database, so a file or live view shows them too when ``--db`` is given.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.errors import InputError
from slurm_defrag.report.top_view import PlanView, TopFrame, plan_view
from slurm_defrag.store.database import Store
from slurm_defrag.store.database_errors import NotFound
from slurm_defrag.store.engine import translate_errors
from slurm_defrag.store.repo import Repository

PLANS_SHOWN = 5
"""Open plans listed at most (the service rarely has more than one or two in flight)."""
_PLANS_SCANNED = 200


class SnapshotSource(Protocol):
    description: str

    def read(self) -> ClusterSnapshot: ...


class FileSource:
    """A snapshot file, re-read at every refresh (``snapshot -o`` may rewrite it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.description = "standard input" if str(path) == "-" else f"file {path}"
        self._once: ClusterSnapshot | None = None
        """Standard input (``-``) is read once, at the first refresh."""

    def read(self) -> ClusterSnapshot:
        from slurm_defrag.snapshot_file import is_stdin, load_snapshot

        if not is_stdin(self.path):
            return load_snapshot(self.path)
        if self._once is None:
            self._once = load_snapshot(self.path)
        return self._once


class LiveSource:
    """The configured Slurm backend (``SLURM_DEFRAG_SLURM_*``), as ``frag`` uses it."""

    def __init__(self) -> None:
        from slurm_defrag.slurm.backends import open_backend
        from slurm_defrag.slurm.connection import load_settings

        settings = load_settings()
        self._backend = open_backend(settings)
        self.description = f"live ({settings.backend})"

    def read(self) -> ClusterSnapshot:
        return self._backend.snapshot()


class StoredSource:
    """The latest snapshot stored in the database, or the last one at or before ``at``."""

    def __init__(self, store: Store, cluster: str | None, at: datetime | None) -> None:
        self.store, self.cluster, self.at = store, cluster, at
        self.description = f"database {store.url}" + (f" as of {at:%Y-%m-%d %H:%M:%S %Z}"
                                                      if at else "")  # fmt: skip

    def read(self) -> ClusterSnapshot:
        repo = Repository(self.store)
        with translate_errors(self.store.url):
            sid = repo.latest_id(self.cluster, self.at)
            if sid is None:
                of = f" of cluster {self.cluster!r}" if self.cluster else ""
                when = f" at or before {self.at:%Y-%m-%d %H:%M:%S %Z}" if self.at else ""
                raise NotFound(f"no snapshot{of}{when} in the database {self.store.url}")
            return repo.load_snapshot(sid)


def stored_plans(store: Store, cluster: str, at: datetime | None = None) -> tuple[PlanView, ...]:
    """The plans open at ``at`` (default now), or else the most recent one, with steps."""
    repo = Repository(store)
    with translate_errors(store.url):
        recs = [r for r in repo.plans.recent(cluster=cluster, limit=_PLANS_SCANNED)
                if at is None or r.created_at <= at]  # fmt: skip
        # Open at ``at`` = not closed by then (a closed plan's closed_at is stamped).
        in_flight = [r for r in recs if r.closed_at is None or (at and r.closed_at > at)]
        chosen = in_flight[:PLANS_SHOWN] or recs[:1]
        return tuple(plan_view(r, repo.plans.steps(r.id), at) for r in chosen)


def parse_at(text: str) -> datetime:
    """``--at``: an ISO 8601 time; without an offset it is UTC."""
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InputError(
            f"--at: {text!r} is not a time like 2026-11-29T12:00 (UTC unless it has an offset)"
        ) from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def frame_reader(
    source: SnapshotSource,
    store: Store | None,
    at: datetime | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Callable[[], TopFrame]:
    """A function reading one fresh frame: snapshot, its metrics, the plans if ``store``."""
    from slurm_defrag.metrics.cache import MetricsCache
    from slurm_defrag.metrics.compute import compute

    cache = MetricsCache()  # kept across refreshes: only node classes that changed are redone

    def read() -> TopFrame:
        snap = source.read()
        plans = None if store is None else stored_plans(store, snap.cluster, at)
        return TopFrame(snapshot=snap, report=compute(snap, cache=cache),
                        source=source.description,
                        refreshed_at=clock(), plans=plans)  # fmt: skip

    return read
