"""Which database to use and how to connect to it.

URL precedence: ``--db`` option, then ``SLURM_DEFRAG_DB_URL``, then an embedded SQLite file
at :func:`default_sqlite_path`. ``postgresql://`` URLs are given the psycopg 3 driver.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, exc
from sqlalchemy.engine import URL, make_url

from slurm_defrag.store.errors import DatabaseUnreachable, DatabaseUrlError

ENV_URL = "SLURM_DEFRAG_DB_URL"


def default_sqlite_path() -> Path:
    """``/var/lib/slurm-defrag/defrag.db`` for root (a system service), else per user state.

    The per-user path follows the XDG base directory spec: ``$XDG_STATE_HOME`` (default
    ``~/.local/state``) ``/slurm-defrag/defrag.db``.
    """
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/slurm-defrag/defrag.db")
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "slurm-defrag" / "defrag.db"


def resolve_url(explicit: str | None = None) -> str:
    """The database URL to use (see module docstring for the order)."""
    if explicit:
        return explicit
    if env := os.environ.get(ENV_URL):
        return env
    path = default_sqlite_path()
    # Only the default location is created for the user; a path they typed must exist, so a
    # typo is reported instead of silently creating a new empty database somewhere.
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o750)
    return f"sqlite:///{path}"


def parse_url(url: str) -> URL:
    """Parse ``url``, mapping bare ``postgresql://`` onto psycopg 3 (the driver we ship)."""
    try:
        parsed = make_url(url)
    except exc.ArgumentError as e:
        raise DatabaseUrlError(f"bad database URL {url!r}: {e}") from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise DatabaseUrlError(
            f"unsupported database {parsed.drivername!r}: use sqlite:///PATH or "
            "postgresql+psycopg://USER@HOST:PORT/DB"
        )
    return parsed


def display_url(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def make_engine(url: str) -> Engine:
    """An engine for ``url`` with the per-backend settings the store relies on."""
    parsed = parse_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed)
    return create_engine(
        parsed,
        pool_pre_ping=True,
        # Fail fast: an unreachable server must become one clear error, not a hang.
        connect_args={"connect_timeout": 5, "application_name": "slurm-defrag"},
    )


def _sqlite_engine(url: URL) -> Engine:
    if url.database and url.database != ":memory:":
        parent = Path(url.database).expanduser().parent
        if not parent.is_dir():
            raise DatabaseUnreachable(
                f"cannot open {display_url(url)}: directory {parent} does not exist"
            )
    # timeout: how long a writer waits for another process's lock (the lease and the
    # snapshot writer may briefly contend with a history reader or a second instance).
    engine = create_engine(url, connect_args={"timeout": 30})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
        # pysqlite's own transaction handling defers BEGIN until the first write and
        # breaks SAVEPOINT and transactional DDL; take control and emit BEGIN ourselves
        # (SQLAlchemy's documented recipe for pysqlite).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA foreign_keys=ON")
        # WAL: readers (history) never block the writer (the service) and vice versa.
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN")

    return engine


def check_reachable(engine: Engine) -> None:
    """Connect once; turn any driver failure into :class:`DatabaseUnreachable`."""
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    except (exc.OperationalError, exc.InterfaceError) as e:
        raise DatabaseUnreachable(
            f"cannot reach database {display_url(engine.url)}: {first_line(e.orig)}"
        ) from None


def first_line(err: BaseException | None) -> str:
    text = str(err or "").strip()
    return text.splitlines()[0] if text else type(err).__name__


@contextmanager
def translate_errors(url: URL | str) -> Iterator[None]:
    """Turn a connection lost or refused mid-command into :class:`DatabaseUnreachable`."""
    try:
        yield
    except (exc.OperationalError, exc.InterfaceError) as e:
        shown = display_url(url) if isinstance(url, URL) else url
        raise DatabaseUnreachable(f"database {shown}: {first_line(e.orig)}") from None
