"""The hooks installed in the live cluster for this package's tests (tests/e2e/hook_install.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hook_install import hooks_installed

from plugins.plugins_support import Installed


@pytest.fixture(scope="package")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """Installed before this package's first test, removed after its last (on each xdist
    worker that runs any of them: each has its own cluster)."""
    with hooks_installed(tmp_path_factory) as done:
        yield done
