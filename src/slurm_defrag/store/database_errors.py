"""Database errors a user can act on; the CLI prints each on one line."""

from __future__ import annotations

from slurm_defrag.errors import DefragError, ExitCode


class StoreError(DefragError):
    """Base of the persistence layer's user-facing errors."""


class DatabaseUnreachable(StoreError):
    """The database cannot be opened or connected to (server down, bad path, bad password)."""

    exit_code = ExitCode.DB_UNREACHABLE


class DatabaseUrlError(StoreError):
    """The database URL is malformed or names a backend this build cannot use."""

    exit_code = ExitCode.BAD_INPUT


class SchemaTooNew(StoreError):
    """The database was migrated by a newer slurm-defrag: its revision is unknown here."""

    exit_code = ExitCode.DB_SCHEMA


class SchemaNotCurrent(StoreError):
    """The database has no schema yet, or an older one: ``slurm-defrag db upgrade`` fixes it."""

    exit_code = ExitCode.DB_SCHEMA


class NotFound(StoreError):
    """A snapshot, plan or step id that is not in the database."""

    exit_code = ExitCode.NOT_FOUND
