"""Errors a user can act on. The CLI prints their message on one line and exits non-zero.

Each kind of failure has its own exit code, so a script (or a systemd ``RestartPreventExitStatus``)
can tell "Slurm is down, try again" from "your file is wrong, fix it". The table is
:class:`ExitCode`; docs/cli.md shows it to users and a test keeps the two in step.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Exit codes of the ``slurm-defrag`` command. Stable: scripts may rely on them."""

    OK = 0
    """Success."""
    FAILED = 1
    """Any other failure the message explains (a traceback instead means a bug)."""
    USAGE = 2
    """Unknown command or option, missing argument (the command line itself is wrong)."""
    BAD_INPUT = 3
    """A file, option or environment value is malformed; the message names file and field."""
    SLURM_UNAVAILABLE = 4
    """Slurm did not answer (slurmctld down, timeout, refused): try again later."""
    SLURM_REJECTED = 5
    """Slurm answered and refused (bad id, permission, state)."""
    SLURM_UNREADABLE = 6
    """Slurm answered something slurm-defrag cannot read; the message names the field."""
    DB_UNREACHABLE = 7
    """The database cannot be opened or connected to."""
    DB_SCHEMA = 8
    """The database schema is older (run ``slurm-defrag db upgrade``) or newer than this code."""
    NOT_FOUND = 9
    """A snapshot, plan or step id that is not in the database."""
    REFUSED = 10
    """A safety rule (protection, limit, kill switch) refused the action."""


class DefragError(Exception):
    """Base of every error that is shown to the user without a traceback."""

    exit_code: int = ExitCode.FAILED


class InputError(DefragError):
    """A file or option given by the user is malformed; the message names file and field."""

    exit_code = ExitCode.BAD_INPUT
