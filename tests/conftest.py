"""Shared fixtures. Paths and the infrastructure gate live in ``infra.py``."""

from __future__ import annotations

import pytest

from infra import EXAMPLES, FIXTURES, IN_CI, ROOT, require

__all__ = ["EXAMPLES", "FIXTURES", "IN_CI", "ROOT", "require"]


@pytest.fixture(scope="session")
def course_snapshot():  # type: ignore[no-untyped-def]
    from slurm_defrag.snapshot_file import load_snapshot

    return load_snapshot(EXAMPLES / "course.json")
