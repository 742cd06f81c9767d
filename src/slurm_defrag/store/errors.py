"""Database errors a user can act on; the CLI prints each on one line."""

from __future__ import annotations

from slurm_defrag.errors import DefragError


class StoreError(DefragError):
    """Base of the persistence layer's user-facing errors."""


class DatabaseUnreachable(StoreError):
    """The database cannot be opened or connected to (server down, bad path, bad password)."""

    exit_code = 3


class DatabaseUrlError(StoreError):
    """The database URL is malformed or names a backend this build cannot use."""


class SchemaTooNew(StoreError):
    """The database was migrated by a newer slurm-defrag: its revision is unknown here."""

    exit_code = 4


class SchemaNotCurrent(StoreError):
    """The database has no schema yet, or an older one: ``slurm-defrag db upgrade`` fixes it."""


class NotFound(StoreError):
    """A snapshot, plan or step id that is not in the database."""
