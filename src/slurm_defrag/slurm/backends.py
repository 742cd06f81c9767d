"""Choosing a backend by name; the only place that knows all of them."""

from __future__ import annotations

from typing import Protocol

from slurm_defrag.slurm.connection import SlurmSettings
from slurm_defrag.slurm.port import SlurmReader, SlurmWriter


class SlurmBackend(SlurmReader, SlurmWriter, Protocol):
    """A backend reads and writes (the fake too)."""


def open_backend(settings: SlurmSettings) -> SlurmBackend:
    """The backend ``settings.backend`` names; imports only what that backend needs."""
    if settings.backend == "rest":
        from slurm_defrag.slurm.rest import RestSlurm

        return RestSlurm(settings)
    if settings.backend == "pyslurm":
        from slurm_defrag.slurm.pyslurm_adapter import PyslurmSlurm

        return PyslurmSlurm(settings)
    from slurm_defrag.slurm.cli_backend import CliSlurm

    return CliSlurm(settings)
