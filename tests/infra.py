"""Paths and the infrastructure gate shared by all tests (import as ``from infra import ...``).

Tests that need real infrastructure (the compose Slurm cluster, PostgreSQL, Docker, busted)
call :func:`require`. Outside CI a missing dependency skips the test with the reason; under
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
