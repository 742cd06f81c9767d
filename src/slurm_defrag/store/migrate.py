"""Alembic, driven from code: upgrade, downgrade, current revision, schema checks.

The migration scripts ship inside the package (``slurm_defrag/store/migrations``) so an
installed slurm-defrag can migrate its database without a source checkout; see
``migrations/README.md`` at the top of the repository.

The check every command runs (:func:`check`) reads ``alembic_version`` with one query and
compares it with :data:`REVISIONS`, without importing Alembic: that import alone costs a
few hundred milliseconds of start-up. A test keeps :data:`REVISIONS` equal to the scripts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, inspect, text

from slurm_defrag import __version__
from slurm_defrag.store.database_errors import SchemaNotCurrent, SchemaTooNew
from slurm_defrag.store.engine import display_url

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

SCRIPT_LOCATION = "slurm_defrag.store:migrations"

REVISIONS = ("0001", "0002", "0003")
"""Every revision shipped, oldest first. Add each new revision here (a test checks it)."""


def alembic_config(connection: Connection | None = None) -> Config:
    """A Config that needs no alembic.ini; ``connection`` is handed to env.py."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", SCRIPT_LOCATION)
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def script() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


def head() -> str:
    return REVISIONS[-1]


def current(engine: Engine) -> str | None:
    """The database's revision, None for an empty database."""
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        rev = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        return None if rev is None else str(rev)


def is_known(rev: str) -> bool:
    """True if ``rev`` is one of the revisions shipped with this code."""
    return rev in REVISIONS


def _refuse_newer(engine: Engine, rev: str | None) -> None:
    if rev is not None and not is_known(rev):
        raise SchemaTooNew(
            f"database {display_url(engine.url)} is at schema revision {rev}, which this "
            f"slurm-defrag {__version__} does not know (newest known: {head()}); it was "
            "migrated by a newer version: upgrade slurm-defrag, or point --db elsewhere"
        )


def check(engine: Engine) -> None:
    """Refuse to work on a database whose schema is not exactly this code's head."""
    rev = current(engine)
    _refuse_newer(engine, rev)
    if rev is None:
        raise SchemaNotCurrent(
            f"database {display_url(engine.url)} has no slurm-defrag schema: "
            "run `slurm-defrag db upgrade`"
        )
    if rev != head():
        raise SchemaNotCurrent(
            f"database {display_url(engine.url)} is at schema revision {rev}, this "
            f"slurm-defrag needs {head()}: run `slurm-defrag db upgrade`"
        )


def upgrade(engine: Engine, target: str = "head") -> tuple[str | None, str | None]:
    """Migrate up to ``target``; returns (revision before, revision after)."""
    before = current(engine)
    _refuse_newer(engine, before)
    from alembic import command

    _run(engine, lambda cfg: command.upgrade(cfg, target))
    return before, current(engine)


def downgrade(engine: Engine, target: str) -> tuple[str | None, str | None]:
    """Migrate down to ``target`` (a revision, ``-1`` or ``base``)."""
    before = current(engine)
    _refuse_newer(engine, before)
    from alembic import command

    _run(engine, lambda cfg: command.downgrade(cfg, target))
    return before, current(engine)


def _run(engine: Engine, op: object) -> None:
    from alembic.util.exc import CommandError

    assert callable(op)
    # One connection, one transaction: a failing migration leaves the schema untouched on
    # PostgreSQL (transactional DDL) and, with our BEGIN handling, on SQLite too.
    with engine.begin() as conn:
        try:
            op(alembic_config(conn))
        except CommandError as e:
            raise SchemaNotCurrent(f"migration failed: {e}") from None
