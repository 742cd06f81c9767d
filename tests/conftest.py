"""Shared test helpers.

Tests that need real infrastructure (the compose Slurm cluster, PostgreSQL, Docker) call
:func:`require`. Outside CI a missing dependency skips the test with the reason; under
``CI=true`` it fails the run, because CI must prove those paths, never skip them silently.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
EXAMPLES = ROOT / "examples"

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(available: bool, what: str) -> None:
    """Fail under CI, skip elsewhere, when ``what`` is not available."""
    if available:
        return
    if IN_CI:
        pytest.fail(f"CI=true but {what} is not available", pytrace=False)
    pytest.skip(f"{what} is not available (runs in CI)")


@pytest.fixture(scope="session")
def course_snapshot():  # type: ignore[no-untyped-def]
    from slurm_defrag.snapshot_file import load_snapshot

    return load_snapshot(EXAMPLES / "course.json")
