"""The repository the service uses: snapshots, plans, steps, commands, retention.

A thin facade: each concern lives in its own module (:mod:`.snapshots`, :mod:`.plans`,
:mod:`.retention`), this class only ties them to one :class:`~.database.Store` and keeps
the snapshot writer's memory of the previous snapshot between calls.
"""

from __future__ import annotations

from datetime import datetime

from slurm_defrag.domain.cluster import ClusterSnapshot, Job
from slurm_defrag.metrics.report import FragReport
from slurm_defrag.store import retention, snapshots
from slurm_defrag.store.database import Store
from slurm_defrag.store.plans import Plans


class Repository:
    """Persistence API of slurm-defrag.

    Examples
    --------
    >>> store = Store.open("sqlite:////tmp/defrag.db")      # doctest: +SKIP
    >>> repo = Repository(store)                            # doctest: +SKIP
    >>> sid = repo.save_snapshot(snapshot, compute(snapshot))  # doctest: +SKIP
    >>> repo.load_snapshot(sid) == snapshot                 # doctest: +SKIP
    True
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._writer = snapshots.SnapshotWriter(store.engine)
        self.plans = Plans(store.engine)
        """Plans, steps and Slurm commands: see :class:`~.plans.Plans`."""

    def save_snapshot(
        self, snapshot: ClusterSnapshot, report: FragReport, mode: str | None = None
    ) -> int:
        """Store a snapshot and its metrics in one transaction; returns its id.

        Only what changed since the previous snapshot of the same cluster is written.
        ``mode``: the service's mode as it stores the snapshot (None: not the service); the
        impact report finds the switch from dry-run to enforce by it.
        """
        return self._writer.save(snapshot, report, mode)

    def load_snapshot(self, snapshot_id: int) -> ClusterSnapshot:
        """The snapshot as saved (equal to the original). Raises NotFound."""
        with self.store.engine.connect() as conn:
            return snapshots.load(conn, snapshot_id)

    def latest_id(self, cluster: str | None = None, at: datetime | None = None) -> int | None:
        """The last snapshot saved (of ``cluster``; taken at or before ``at`` if given)."""
        with self.store.engine.connect() as conn:
            return snapshots.latest_id(conn, cluster, at)

    def recent_jobs(self, cluster: str, limit: int) -> list[Job]:
        """The last ``limit`` jobs seen in ``cluster``, oldest first, as first seen."""
        with self.store.engine.connect() as conn:
            return snapshots.recent_jobs(conn, cluster, limit)

    def latest(self, cluster: str | None = None) -> ClusterSnapshot | None:
        """The last snapshot saved (of ``cluster``), None if there is none."""
        sid = self.latest_id(cluster)
        return None if sid is None else self.load_snapshot(sid)

    def prune(
        self, policy: retention.RetentionPolicy | None = None, now: float | None = None
    ) -> retention.PruneResult:
        """Apply the retention policy; see :func:`.retention.prune`."""
        return retention.prune(self.store, policy, now)
