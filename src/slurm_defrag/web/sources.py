"""Where the page's data comes from: a snapshot file, or a database the service writes.

The service's own page and ``slurm-defrag web --db`` read the same :class:`StoreSource`:
the latest stored snapshot (the service stores one per cycle, so that is "live"), the
history views of :mod:`slurm_defrag.store.frag_history` and the plans of
:class:`~slurm_defrag.store.plans.Plans`. A :class:`FileSource` has one snapshot and
neither history nor plans.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.errors import DefragError
from slurm_defrag.metrics.compute import compute
from slurm_defrag.store.database import Store
from slurm_defrag.store.database_errors import NotFound
from slurm_defrag.store.engine import translate_errors
from slurm_defrag.store.frag_history import load_history
from slurm_defrag.store.plans import Plans
from slurm_defrag.store.repo import Repository
from slurm_defrag.web import payload
from slurm_defrag.web.payload import Json

_V = TypeVar("_V")


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

    def impact(self, since_s: float, change: str) -> Json | None:
        """The impact report over the last ``since_s`` seconds cut at ``change`` (``mode``
        or a time); None = no history here. Raises NotFound with the reason when there
        is nothing to compare."""


class FileSource:
    """One snapshot file, read and measured once."""

    def __init__(self, snapshot: ClusterSnapshot, path: Path) -> None:
        self.description = (
            "the snapshot read from standard input" if str(path) == "-" else f"snapshot file {path}"
        )
        self._payload = payload.snapshot_payload(snapshot, compute(snapshot))

    def latest_key(self) -> Hashable | None:
        return "file"

    def snapshot(self, key: Hashable) -> Json:
        return self._payload

    def history(self, since_s: float) -> Json | None:
        return None

    def plans(self, limit: int) -> list[Json] | None:
        return None

    def impact(self, since_s: float, change: str) -> Json | None:
        return None


def _no_history() -> Json:
    return {"series": [], "nodes": [], "worst": []}


class Busy(DefragError):
    """Too many page requests are reading the database already (answered 503)."""


class _PerSnapshot:
    """Payloads computed for the newest snapshot, by argument; all dropped when a newer one
    is stored. ``max_age_s`` also expires an entry: plans move on within a cycle, after the
    cycle stored its snapshot."""

    MAX_ENTRIES = 16  # a few windows or limits in use at once; more is someone's loop

    def __init__(self, max_age_s: float | None = None) -> None:
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._latest: Hashable = None
        self._values: dict[Hashable, tuple[float, Any]] = {}

    def get(self, latest: Hashable, arg: Hashable, build: Callable[[], _V]) -> _V:
        now = time.monotonic()
        with self._lock:
            if latest != self._latest:
                self._latest, self._values = latest, {}
            hit = self._values.get(arg)
        if hit is not None and (self.max_age_s is None or now - hit[0] < self.max_age_s):
            return cast(_V, hit[1])
        value = build()  # outside the lock: concurrent requests build concurrently
        with self._lock:
            if latest == self._latest:
                if len(self._values) >= self.MAX_ENTRIES:
                    self._values.clear()
                self._values[arg] = (now, value)
        return value


class StoreSource:
    """A database: the latest snapshot, history and plans, read at every request.

    Every payload is kept for the latest snapshot id (plans for ``plans_max_age_s`` at most),
    so a page refreshing every few seconds, in any number of tabs, costs one indexed query
    until the service stores a new snapshot. At most ``readers`` requests read the database
    at once: the service's lease renewal shares its connection pool with the page, and
    must never wait behind several tabs' history queries. A request that gets no turn
    within ``wait_s`` is answered 503 (busy).
    """

    def __init__(
        self,
        store: Store,
        *,
        readers: int = 2,
        wait_s: float = 3.0,
        plans_max_age_s: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.description = f"database {store.url}"
        self._store = store
        self._clock = clock
        """Epoch seconds: the end of the history window (tests pass their fake clock)."""
        self._repo = Repository(store)
        self._plans = Plans(store.engine)
        self._turns = threading.BoundedSemaphore(readers)
        self._wait_s = wait_s
        self._snapshots = _PerSnapshot()
        self._histories = _PerSnapshot()
        self._plan_lists = _PerSnapshot(max_age_s=plans_max_age_s)
        self._impacts = _PerSnapshot()

    @contextmanager
    def _reading(self) -> Iterator[None]:
        if not self._turns.acquire(timeout=self._wait_s):
            raise Busy("busy: too many page requests are reading the database; try again")
        try:
            with translate_errors(self._store.url):
                yield
        finally:
            self._turns.release()

    def latest_key(self) -> Hashable | None:
        with self._reading():
            return self._repo.latest_id()

    def snapshot(self, key: Hashable) -> Json:
        assert isinstance(key, int)

        def build() -> Json:
            with self._reading():
                snap = self._repo.load_snapshot(key)
            return payload.snapshot_payload(snap, compute(snap), key)

        return self._snapshots.get(key, None, build)

    def history(self, since_s: float) -> Json | None:
        latest = self.latest_key()
        if latest is None:  # no snapshot yet: an empty chart, not an error
            return _no_history()

        def build() -> Json:
            try:
                with self._reading():
                    history = load_history(self._store, since_s, now=self._clock())
                    return payload.history_payload(history)
            except NotFound:  # pruned meanwhile: an empty chart, not an error
                return _no_history()

        return self._histories.get(latest, since_s, build)

    def impact(self, since_s: float, change: str) -> Json | None:
        from slurm_defrag.store.impact import ChangePoint, load_impact

        now = self._clock()
        point = ChangePoint.parse(change, now)  # a bad value is the request's error, at once

        def build() -> Json:
            with self._reading():
                return payload.impact_payload(load_impact(self._store, since_s, point, now=now))

        return self._impacts.get(self.latest_key(), (since_s, change), build)

    def plans(self, limit: int) -> list[Json] | None:
        def build() -> list[Json]:
            with self._reading():
                return [
                    payload.plan_payload(
                        p, self._plans.steps(p.id), self._plans.commands(plan_id=p.id)
                    )
                    for p in self._plans.recent(limit=limit)
                ]

        return self._plan_lists.get(self.latest_key(), limit, build)
