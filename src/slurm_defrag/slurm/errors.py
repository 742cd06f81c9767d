"""The three ways talking to Slurm fails, so callers can decide to retry or give up."""

from __future__ import annotations

from slurm_defrag.errors import DefragError


class SlurmError(DefragError):
    """Base of all adapter errors."""


class SlurmUnavailableError(SlurmError):
    """Slurm did not answer (slurmctld down, timeout, socket refused): retry later."""

    exit_code = 3


class SlurmRejectedError(SlurmError):
    """Slurm answered and refused the request (bad job id, permission, invalid state)."""

    exit_code = 4


class SlurmParseError(SlurmError):
    """Slurm answered something we cannot read; the message names the field."""

    exit_code = 5
