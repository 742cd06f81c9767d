"""Alembic environment: used by ``slurm-defrag db ...`` and by developers' ``alembic``.

From code (:mod:`slurm_defrag.store.migrate`) an open connection is passed in
``config.attributes["connection"]``. From the ``alembic`` command line
(``alembic -c migrations/alembic.ini ...``) the URL comes from ``-x db=URL``, else
``SLURM_DEFRAG_DB_URL``, else the default SQLite file.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from slurm_defrag.store.engine import make_engine, resolve_url
from slurm_defrag.store.models import Base

target_metadata = Base.metadata


def _configure_and_run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        # SQLite cannot ALTER most things; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    given = context.config.attributes.get("connection")
    if isinstance(given, Connection):
        _configure_and_run(given)
        return
    url = context.get_x_argument(as_dictionary=True).get("db")
    engine = make_engine(resolve_url(url))
    with engine.begin() as connection:
        _configure_and_run(connection)
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; run against a database")
run_online()
