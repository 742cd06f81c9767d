"""The recorded-output backends of :mod:`slurm_recordings` as a fixture for this folder."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from slurm_recordings import (
    TAKEN_AT,
    ReplayRunner,
    cli_backend,
    fixture_dir,
    pyslurm_backend,
    pyslurm_module,
    recorded_text,
    rest_backend,
    rest_transport,
    settings_for,
)


@pytest.fixture
def recordings() -> SimpleNamespace:
    """The helpers of slurm_recordings, for the tests of this folder."""
    return SimpleNamespace(
        ReplayRunner=ReplayRunner,
        cli=cli_backend,
        rest=rest_backend,
        pyslurm=pyslurm_backend,
        rest_transport=rest_transport,
        text=recorded_text,
        dir=fixture_dir,
        taken_at=TAKEN_AT,
        settings=settings_for,
        pyslurm_module=pyslurm_module,
    )
