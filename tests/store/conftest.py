"""Fixtures for the persistence tests: a fresh database per test, on SQLite and PostgreSQL.

PostgreSQL comes from ``SLURM_DEFRAG_TEST_PG_URL`` or, when unset, from
``scripts/postgres.sh start`` (a throwaway local server). Each test gets its own scratch
database on it, dropped afterwards. Missing PostgreSQL skips those tests, or fails them
under ``CI=true`` (see ``tests/conftest.py``).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import sqlalchemy.exc
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url

from infra import require
from slurm_defrag.store import migrate
from slurm_defrag.store.database import Store
from slurm_defrag.store.engine import make_engine

ROOT = Path(__file__).resolve().parents[2]

PG_ENV = "SLURM_DEFRAG_TEST_PG_URL"


@pytest.fixture(scope="session")
def pg_server() -> str | None:
    """URL of a PostgreSQL server we may create databases on, or None."""
    url = os.environ.get(PG_ENV)
    if url:
        return url
    script = ROOT / "scripts" / "postgres.sh"
    try:
        done = subprocess.run(
            ["bash", str(script), "start"], capture_output=True, text=True, timeout=600
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-2000:])
        return None
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture
def pg_url(pg_server: str | None) -> Iterator[str]:
    """A new empty database on the test server, dropped after the test."""
    require(pg_server is not None, f"PostgreSQL ({PG_ENV} or scripts/postgres.sh)")
    assert pg_server is not None
    name = f"defrag_t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(pg_server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as e:  # any failure here means: no usable server
        admin.dispose()
        require(False, f"PostgreSQL at {pg_server} ({e.__class__.__name__})")
    url = make_url(pg_server).set(database=name).render_as_string(hide_password=False)
    yield url
    _drop_database(admin, name)
    admin.dispose()


def _drop_database(admin: Engine, name: str) -> None:
    """Drop a scratch database, tolerating an autovacuum worker connected to it.

    WITH (FORCE) terminates other sessions, but the unprivileged test role may not signal an
    autovacuum worker (owned by the superuser): retry briefly, then leave the database to the
    throwaway server (scripts/postgres.sh) rather than fail a test that passed.
    """
    for _ in range(20):
        try:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            return
        except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.ProgrammingError):
            time.sleep(0.25)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'defrag.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> str:
    """An empty database of each backend."""
    name = "sqlite_url" if request.param == "sqlite" else "pg_url"
    url: str = request.getfixturevalue(name)
    return url


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    """An upgraded, open store of each backend."""
    engine = make_engine(db_url)
    migrate.upgrade(engine)
    engine.dispose()
    with Store.open(db_url) as s:
        yield s


@pytest.fixture(scope="session")
def churn_module() -> ModuleType:
    """bench/store_bench.py, for its incremental cluster simulator ``Churn``."""
    path = ROOT / "bench" / "store_bench.py"
    spec = importlib.util.spec_from_file_location("store_bench", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
