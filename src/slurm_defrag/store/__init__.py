"""Persistence: snapshots, metrics history, plans, Slurm commands and the leader lease.

Modules, one job each:

* :mod:`.models` — the tables (SQLAlchemy typed ORM); migrations in ``.migrations``;
* :mod:`.engine` — which database (URL, default SQLite path) and connecting to it;
* :mod:`.database` — :class:`Store`, an open and schema-checked database;
* :mod:`.migrate` — Alembic driven from code (``slurm-defrag db ...``);
* :mod:`.codec` / :mod:`.snapshots` — snapshots to interval rows and back;
* :mod:`.plans` — plans, steps, commands;
* :mod:`.retention` — rollups and pruning;
* :mod:`.lease` — one acting instance at a time;
* :mod:`.frag_history` — the queries behind ``slurm-defrag history``;
* :mod:`.repo` — the facade the service uses.

Design notes and retention rules: ``docs/persistence.md``.
"""
