"""Shared fixtures. Paths and the infrastructure gate live in ``infra.py``."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from infra import EXAMPLES, FIXTURES, IN_CI, ROOT, require

# Tests check correctness, not speed: hypothesis's deadline and its slow-generation health
# check are wall-clock assertions, and the test command runs at nice 10 beside the live
# lanes (a property test of queue_order failed its health check on a loaded machine).
settings.register_profile(
    "slurm-defrag", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("slurm-defrag")

__all__ = ["EXAMPLES", "FIXTURES", "IN_CI", "ROOT", "require"]


def pytest_configure(config: pytest.Config) -> None:
    """Bind this xdist worker to its own compose Slurm cluster (``LIVE_CLUSTERS``).

    scripts/test.sh runs a suite's live tests on several clusters of the same release at
    once: one pytest with one xdist worker per cluster (``--dist loadfile``). Worker
    ``gwN`` takes the N-th ``prefix:slurmrestd_port:postgres_port`` entry and exports it
    as CLUSTER_PREFIX / SLURMRESTD_PORT / POSTGRES_PORT before any test module (and so
    ``live_cluster``) is imported; scripts/cluster.sh and the service containers the tests
    start read the same variables. Without xdist or LIVE_CLUSTERS nothing changes.
    """
    del config
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    clusters = os.environ.get("LIVE_CLUSTERS", "").split()
    if not (worker.startswith("gw") and clusters):
        return
    prefix, rest_port, pg_port = clusters[int(worker[2:]) % len(clusters)].split(":")
    os.environ.update(CLUSTER_PREFIX=prefix, SLURMRESTD_PORT=rest_port, POSTGRES_PORT=pg_port)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, the ``slow`` tests first: each is one long hypothesis run that cannot be
    split, so started last it would be the phase's tail on one worker while the other
    idles; started first, the short tests fill in around it (``--dist worksteal``)."""
    for item in items:
        # every test of a *_fuzz.py file: scripts/test.sh runs them in fresh workers,
        # where tests/fuzzing.py's memory bound is cheap
        if item.path.name.endswith("_fuzz.py"):
            item.add_marker(pytest.mark.fuzz)
    if config.pluginmanager.hasplugin("xdist") and config.getoption("numprocesses", None):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def course_snapshot():  # type: ignore[no-untyped-def]
    from slurm_defrag.snapshot_file import load_snapshot

    return load_snapshot(EXAMPLES / "course.json")
