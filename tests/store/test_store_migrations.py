"""Migrations: they build exactly the models' schema, go down and up, and guard versions."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from slurm_defrag.store import migrate
from slurm_defrag.store.database import Store
from slurm_defrag.store.database_errors import SchemaNotCurrent, SchemaTooNew
from slurm_defrag.store.engine import make_engine
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


def test_0002_marks_dry_run_commands_not_executed_and_back(db_url: str) -> None:
    """Upgrading turns the old dry-run rows (exit 0, as if run) into not executed, exit
    NULL; the real commands keep their exit codes; downgrading gives the old rows back."""
    engine = make_engine(db_url)
    migrate.upgrade(engine, "0001")
    insert = text(
        "INSERT INTO slurm_commands (started_at, argv, exit_code, stdout, stderr, duration_s,"
        " dry_run) VALUES (:t, :argv, :code, '', :err, 0.1, :dry)"
    )
    rows = [(0, "", True), (1, "refused", True), (0, "", False), (None, "down", False)]
    with engine.begin() as conn:
        for code, err, dry in rows:
            conn.execute(insert, {"t": "2026-12-01 10:00:00", "argv": '["scontrol"]',
                                  "code": code, "err": err, "dry": dry})  # fmt: skip
    select_all = text("SELECT exit_code, executed, dry_run FROM slurm_commands ORDER BY id")
    migrate.upgrade(engine)
    with engine.connect() as conn:
        got = [(r[0], bool(r[1]), bool(r[2])) for r in conn.execute(select_all)]
    assert got == [(None, False, True), (None, False, True), (0, True, False), (None, True, False)]
    # New rows default to executed (the column has a server default for old writers too).
    with engine.begin() as conn:
        conn.execute(insert, {"t": "2026-12-01 11:00:00", "argv": "[]", "code": 0, "err": "",
                              "dry": False})  # fmt: skip
        assert bool(conn.execute(text("SELECT executed FROM slurm_commands WHERE id = 5"))
                    .scalar())  # fmt: skip
    migrate.downgrade(engine, "0001")
    assert "executed" not in {c["name"] for c in inspect(engine).get_columns("slurm_commands")}
    with engine.connect() as conn:
        codes = [
            r[0] for r in conn.execute(text("SELECT exit_code FROM slurm_commands ORDER BY id"))
        ]
    assert codes == [0, 1, 0, None, 0]
    engine.dispose()
