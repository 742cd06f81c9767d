"""Which database to use and how to connect to it.

URL precedence: ``--db`` option, then ``SLURM_DEFRAG_DB_URL``, then an embedded SQLite file
at :func:`default_sqlite_path`. ``postgresql://`` URLs are given the psycopg 3 driver.

The database holds every user's jobs (names, comments, accounts) — what Slurm's
``PrivateData`` hides from other users — so a SQLite file this code creates is mode 0600
and the default state directory 0700. Passwords never appear in a message: URLs are shown
through :func:`display_url` or :func:`mask_password`.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, exc
from sqlalchemy.engine import URL, make_url

from slurm_defrag.store.database_errors import DatabaseUnreachable, DatabaseUrlError

ENV_URL = "SLURM_DEFRAG_DB_URL"

log = logging.getLogger(__name__)


def default_sqlite_path() -> Path:
    """``/var/lib/slurm-defrag/defrag.db`` for root (a system service), else per user state.

    The per-user path follows the XDG base directory spec: ``$XDG_STATE_HOME`` (default
    ``~/.local/state``) ``/slurm-defrag/defrag.db``.
    """
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/slurm-defrag/defrag.db")
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "slurm-defrag" / "defrag.db"


CHOOSE_ANOTHER = (
    "choose a database with --db URL, SLURM_DEFRAG_DB_URL or db_url in the service config"
)
"""How to name another database: every command that opens one takes these."""


def resolve_url(explicit: str | None = None, *, create: bool = True) -> str:
    """The database URL to use (see module docstring for the order).

    ``create=False`` leaves the default folder alone (``doctor`` only looks).
    Raises :class:`DatabaseUnreachable` when the default folder cannot be created (a
    service account whose home does not exist, a read-only home).
    """
    if explicit:
        return explicit
    if env := os.environ.get(ENV_URL):
        return env
    path = default_sqlite_path()
    if not create:
        return f"sqlite:///{path}"
    # Only the default location is created for the user; a path they typed must exist, so a
    # typo is reported instead of silently creating a new empty database somewhere.
    # 0700: private to the service's account (an existing directory is left as it is).
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise DatabaseUnreachable(
            f"cannot create the default database folder {path.parent}: "
            f"{exc.strerror or type(exc).__name__}; {CHOOSE_ANOTHER}"
        ) from None
    return f"sqlite:///{path}"


def parse_url(url: str) -> URL:
    """Parse ``url``, mapping bare ``postgresql://`` onto psycopg 3 (the driver we ship)."""
    try:
        parsed = make_url(url)
    except exc.ArgumentError as e:
        raise DatabaseUrlError(f"bad database URL {mask_password(url)!r}: {e}") from None
    except ValueError:  # int() of the port: "host:abc", "[::1" (unclosed IPv6 bracket)
        raise DatabaseUrlError(
            f"bad database URL {mask_password(url)!r}: the port (after host:) must be a number"
        ) from None
    if parsed.port is not None and not 1 <= parsed.port <= 65535:
        raise DatabaseUrlError(
            f"bad database URL {display_url(parsed)!r}: port {parsed.port} is not in 1..65535"
        )
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


def mask_password(text: str) -> str:
    """``text`` (a URL that may not parse) with the password between ``user:`` and ``@``
    replaced by ``***``; the last ``@`` ends it, as a password may hold ``@`` or ``/``."""
    scheme, sep, rest = text.partition("://")
    if not sep or "@" not in rest:
        return text
    creds, _, host = rest.rpartition("@")
    user, colon, _password = creds.partition(":")
    return f"{scheme}://{user}{colon and ':***'}@{host}"


def _scrub(message: str, url: URL) -> str:
    """A driver's message with the URL's password masked, should the driver echo it."""
    return message.replace(url.password, "***") if url.password else message


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
    if url.database and url.database != ":memory:" and not url.database.startswith("file:"):
        path = Path(url.database).expanduser()
        if not path.parent.is_dir():
            raise DatabaseUnreachable(
                f"cannot open {display_url(url)}: directory {path.parent} does not exist"
            )
        _private_file(path)
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


def _private_file(path: Path) -> None:
    """Create the SQLite file 0600 before SQLite does (it would use the umask, often 0644);
    its ``-wal`` and ``-shm`` files copy the mode. Warn about an existing file that other
    users can read: the admin chose that mode, so it is left alone."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        return
    except FileExistsError:
        pass
    except OSError:
        return  # SQLite will report it (read-only directory, ...) when it connects
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if stat.S_ISREG(mode) and mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning(
            "database file %s has mode %04o: other users can read every job it records "
            "(chmod 600 %s)",
            path,
            stat.S_IMODE(mode),
            path,
        )


def check_reachable(engine: Engine) -> None:
    """Connect once; turn any driver failure into :class:`DatabaseUnreachable`."""
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    except exc.DatabaseError as e:  # also "file is not a database" (a corrupt SQLite file)
        verb = "open" if engine.dialect.name == "sqlite" else "reach"
        raise DatabaseUnreachable(
            f"cannot {verb} database {display_url(engine.url)}: "
            + _scrub(first_line(e.orig), engine.url)
        ) from None
    except exc.InterfaceError as e:
        raise DatabaseUnreachable(
            f"cannot reach database {display_url(engine.url)}: "
            + _scrub(first_line(e.orig), engine.url)
        ) from None


def first_line(err: BaseException | None) -> str:
    text = str(err or "").strip()
    return text.splitlines()[0] if text else type(err).__name__


@contextmanager
def translate_errors(url: URL | str) -> Iterator[None]:
    """Turn a connection lost or refused mid-command into :class:`DatabaseUnreachable`."""
    try:
        yield
    except (exc.DatabaseError, exc.InterfaceError) as e:
        if isinstance(e, exc.IntegrityError | exc.ProgrammingError):
            raise  # our bug, not the database's state: keep the traceback
        shown = display_url(url) if isinstance(url, URL) else mask_password(url)
        message = first_line(e.orig)
        if isinstance(url, URL):
            message = _scrub(message, url)
        raise DatabaseUnreachable(f"database {shown}: {message}") from None
