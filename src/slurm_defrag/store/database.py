"""An open database: the engine, checked reachable and (by default) at this code's schema."""

from __future__ import annotations

import time
from types import TracebackType

from sqlalchemy import Connection, Engine

from slurm_defrag.store import migrate
from slurm_defrag.store.engine import check_reachable, display_url, make_engine, resolve_url


class Store:
    """Entry point of the persistence layer; pass it to Repository, Lease and queries.

    Parameters
    ----------
    engine
        A SQLAlchemy engine made by :func:`slurm_defrag.store.engine.make_engine`.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @classmethod
    def open(cls, url: str | None = None, *, check_schema: bool = True) -> Store:
        """Connect to ``url`` (default: :func:`resolve_url`) and check the schema.

        Raises
        ------
        DatabaseUnreachable, DatabaseUrlError, SchemaTooNew, SchemaNotCurrent
        """
        engine = make_engine(resolve_url(url))
        try:
            check_reachable(engine)
            if check_schema:
                migrate.check(engine)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine)

    @property
    def url(self) -> str:
        return display_url(self.engine.url)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def clock(self, conn: Connection) -> float:
        """Epoch seconds by the clock every instance agrees on.

        PostgreSQL's clock for a server shared by several hosts (their clocks may drift);
        the local clock for SQLite, which only processes of one host can share.
        """
        if self.dialect == "postgresql":
            value = conn.exec_driver_sql("SELECT extract(epoch from clock_timestamp())::float8")
            return float(value.scalar_one())
        return time.time()

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
