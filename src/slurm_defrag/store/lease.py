"""The leader lease: only one service instance acts on the cluster at a time.

A row per lease name holds the holder, an expiry time and an ``epoch`` that grows on every
change of holder (a fencing token: an action can carry it, and a stale leader's is lower).
The same row-with-expiry scheme serves SQLite and PostgreSQL; an advisory lock would tie
leadership to one database session and die silently with a pooled connection.

The holder renews every ``ttl_s / 3`` or so. If it dies (even ``kill -9``) nobody renews and
another instance takes over once ``expires_at`` passes. ``held`` also turns False on its own
when the local deadline passes without a successful renewal, so a leader cut off from the
database stops acting before anyone else can start.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from sqlalchemy import case, exc, insert, or_, select, update

from slurm_defrag.store.database import Store
from slurm_defrag.store.models import LeaseRow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseInfo:
    name: str
    holder: str
    epoch: int
    expires_at: float
    """Epoch seconds by the store's clock (see :meth:`Store.clock`)."""


class Lease:
    """One instance's handle on the lease ``name``.

    Parameters
    ----------
    store
        The database every instance shares.
    holder_id
        Unique per instance, e.g. ``f"{hostname}:{pid}"``.
    ttl_s
        How long a grant lasts without renewal; also the worst-case takeover time.
    """

    def __init__(self, store: Store, holder_id: str, ttl_s: float = 30.0, name: str = "leader"):
        if ttl_s <= 0:
            raise ValueError("ttl_s must be positive")
        self.store = store
        self.holder_id = holder_id
        self.ttl_s = ttl_s
        self.name = name
        self._deadline = 0.0  # time.monotonic() after which we may no longer act
        self._epoch: int | None = None

    @property
    def held(self) -> bool:
        """True while this instance may act: granted and not past its local deadline."""
        return self._epoch is not None and time.monotonic() < self._deadline

    @property
    def epoch(self) -> int | None:
        """Fencing token of the current grant, None when not held."""
        return self._epoch if self.held else None

    def acquire(self) -> bool:
        """Take the lease if it is free or expired, or extend it if we hold it."""
        return self._claim(take_over=True)

    def renew(self) -> bool:
        """Extend our grant; False if someone else holds the lease now."""
        return self._claim(take_over=False)

    def release(self) -> None:
        """Give the lease up now so a standby need not wait for the expiry."""
        self._epoch = None
        try:
            with self.store.engine.begin() as conn:
                now = self.store.clock(conn)
                conn.execute(
                    update(LeaseRow)
                    .where(LeaseRow.name == self.name, LeaseRow.holder == self.holder_id)
                    .values(expires_at=now)
                )
        except exc.DBAPIError as e:  # expiry frees it anyway
            log.warning("could not release lease %s: %s", self.name, e.orig)

    def info(self) -> LeaseInfo | None:
        """Who holds the lease per the database (may be expired), None if never taken."""
        with self.store.engine.connect() as conn:
            row = conn.execute(
                select(LeaseRow.holder, LeaseRow.epoch, LeaseRow.expires_at).where(
                    LeaseRow.name == self.name
                )
            ).first()
        return None if row is None else LeaseInfo(self.name, row[0], row[1], row[2])

    def describe(self) -> str:
        """One line for logs and status output: leader, or read-only and who leads."""
        if self.held:
            return f"leader ({self.name} lease, epoch {self._epoch})"
        info = self.info()
        if info is None:
            return f"read-only: {self.name} lease not taken yet"
        return f"read-only: {self.name} lease held by {info.holder} (epoch {info.epoch})"

    def _claim(self, *, take_over: bool) -> bool:
        # The local deadline counts from *before* the round trip: the grant may have been
        # written late in it, never earlier than this.
        started = time.monotonic()
        try:
            granted = self._claim_tx(take_over)
        except exc.IntegrityError:
            granted = None  # another instance inserted the first row at the same moment
        except exc.DBAPIError as e:
            # Database unreachable: keep acting only until the deadline already granted.
            log.warning("lease %s: database error, not renewed: %s", self.name, e.orig)
            return self.held
        if granted is None:
            self._epoch = None
            return False
        self._epoch = granted
        self._deadline = started + self.ttl_s
        return True

    def _claim_tx(self, take_over: bool) -> int | None:
        me = self.holder_id
        with self.store.engine.begin() as conn:
            now = self.store.clock(conn)
            mine = LeaseRow.holder == me
            condition = or_(mine, LeaseRow.expires_at <= now) if take_over else mine
            # One conditional UPDATE: row locks (PostgreSQL) or the write lock (SQLite) make
            # it atomic, so two instances can never both see their condition hold.
            result = conn.execute(
                update(LeaseRow)
                .where(LeaseRow.name == self.name, condition)
                .values(
                    holder=me,
                    expires_at=now + self.ttl_s,
                    epoch=case((mine, LeaseRow.epoch), else_=LeaseRow.epoch + 1),
                    acquired_at=case((mine, LeaseRow.acquired_at), else_=now),
                )
                .returning(LeaseRow.epoch)
            ).first()
            if result is not None:
                return int(result[0])
            if not take_over:
                return None
            exists = conn.execute(select(LeaseRow.name).where(LeaseRow.name == self.name)).first()
            if exists is not None:
                return None
            conn.execute(
                insert(LeaseRow).values(
                    name=self.name, holder=me, epoch=1, acquired_at=now, expires_at=now + self.ttl_s
                )
            )
            return 1
