"""Migrations: they build exactly the models' schema, go down and up, and guard versions."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from slurm_defrag.store import migrate
from slurm_defrag.store.database import Store
from slurm_defrag.store.engine import make_engine
from slurm_defrag.store.errors import SchemaNotCurrent, SchemaTooNew
from slurm_defrag.store.models import Base


def test_models_and_migrations_do_not_drift(db_url: str) -> None:
    engine = make_engine(db_url)
    migrate.upgrade(engine)
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(ctx, Base.metadata)
    engine.dispose()
    assert diff == []


def test_downgrade_to_base_and_up_again(db_url: str) -> None:
    engine = make_engine(db_url)
    assert migrate.upgrade(engine) == (None, migrate.head())
    assert migrate.upgrade(engine) == (migrate.head(), migrate.head())  # idempotent
    assert migrate.downgrade(engine, "base") == (migrate.head(), None)
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    migrate.upgrade(engine)
    assert set(Base.metadata.tables) <= set(inspect(engine).get_table_names())
    engine.dispose()


def test_store_refuses_empty_and_newer_schemas(db_url: str) -> None:
    with pytest.raises(SchemaNotCurrent, match="db upgrade"):
        Store.open(db_url)
    engine = make_engine(db_url)
    migrate.upgrade(engine)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'f00dfeedbeef'"))
    with pytest.raises(SchemaTooNew, match=r"f00dfeedbeef.*newer version"):
        Store.open(db_url)
    with pytest.raises(SchemaTooNew):
        migrate.upgrade(engine)  # never "upgrade" past a revision we cannot read
    engine.dispose()


def test_revision_list_matches_the_scripts() -> None:
    """migrate.REVISIONS (read without importing Alembic) must list every script, in order."""
    scripts = [r.revision for r in migrate.script().walk_revisions()]
    assert tuple(reversed(scripts)) == migrate.REVISIONS
