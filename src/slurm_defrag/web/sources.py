"""Where the page's data comes from: a snapshot file, or a database the service writes.

The service's own page and ``slurm-defrag web --db`` read the same :class:`StoreSource`:
the latest stored snapshot (the service stores one per cycle, so that is "live"), the
history views of :mod:`slurm_defrag.store.history` and the plans of
:class:`~slurm_defrag.store.plans.Plans`. A :class:`FileSource` has one snapshot and
neither history nor plans.
"""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Protocol

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.metrics.compute import compute
from slurm_defrag.store.database import Store
from slurm_defrag.store.engine import translate_errors
from slurm_defrag.store.errors import NotFound
from slurm_defrag.store.history import load_history
from slurm_defrag.store.plans import Plans
from slurm_defrag.store.repo import Repository
from slurm_defrag.web import payload
from slurm_defrag.web.payload import Json


class Source(Protocol):
    description: str
    """Shown on the page: which file or database is on screen."""

    def latest_key(self) -> Hashable | None:
        """Names the newest snapshot (cheap); None when there is none yet."""

    def snapshot(self, key: Hashable) -> Json:
        """The map payload of the snapshot ``latest_key`` named."""

    def history(self, since_s: float) -> Json | None:
        """The history views over the last ``since_s`` seconds; None = no history here."""

    def plans(self, limit: int) -> list[Json] | None:
        """The newest ``limit`` plans, newest first; None = no plans here."""


class FileSource:
    """One snapshot file, read and measured once."""

    def __init__(self, snapshot: ClusterSnapshot, path: Path) -> None:
        self.description = f"snapshot file {path}"
        self._payload = payload.snapshot_payload(snapshot, compute(snapshot))

    def latest_key(self) -> Hashable | None:
        return "file"

    def snapshot(self, key: Hashable) -> Json:
        return self._payload

    def history(self, since_s: float) -> Json | None:
        return None

    def plans(self, limit: int) -> list[Json] | None:
        return None


class StoreSource:
    """A database: the latest snapshot, history and plans, read at every request.

    The map payload is kept for the latest snapshot id, so a page refreshing every few
    seconds costs one indexed query until the service stores a new snapshot.
    """

    def __init__(self, store: Store) -> None:
        self.description = f"database {store.url}"
        self._store = store
        self._repo = Repository(store)
        self._plans = Plans(store.engine)
        self._cached: tuple[Hashable, Json] | None = None

    def latest_key(self) -> Hashable | None:
        with translate_errors(self._store.url):
            return self._repo.latest_id()

    def snapshot(self, key: Hashable) -> Json:
        cached = self._cached  # one read: another request thread may replace it meanwhile
        if cached is not None and cached[0] == key:
            return cached[1]
        assert isinstance(key, int)
        with translate_errors(self._store.url):
            snap = self._repo.load_snapshot(key)
        body = payload.snapshot_payload(snap, compute(snap), key)
        self._cached = (key, body)
        return body

    def history(self, since_s: float) -> Json | None:
        try:
            with translate_errors(self._store.url):
                return payload.history_payload(load_history(self._store, since_s))
        except NotFound:  # no snapshot yet: an empty chart, not an error
            return {"series": [], "nodes": [], "worst": []}

    def plans(self, limit: int) -> list[Json] | None:
        with translate_errors(self._store.url):
            return [
                payload.plan_payload(p, self._plans.steps(p.id), self._plans.commands(plan_id=p.id))
                for p in self._plans.recent(limit=limit)
            ]
