"""Live: job_submit.lua's ``short_first.keep`` in a real slurmctld.

What a profile's ``keep_scarce`` assumes in the simulator and this records on each
release: the script's ``job_desc.exc_nodes`` is stored as the job's ExcNodeList and
slurmctld never starts the job there; a job that only the kept nodes hold, or that names
its nodes or its own ``--exclude``, gets nothing added; under a demand, the scarce jobs
the script has seen in its window live in its Lua state from one submission to the next.

The table marks node01-03 (the A100 and A100-80GB nodes) kept, by hand, so that node04
is the only other node: which types the render keeps (big variants of common nodes,
``packing.node_levers.mark_kept``) is tested offline; the compose cluster's four nodes are
alike in CPUs and memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from plugins.plugins_support import Cluster, Installed, table_with

from .test_live_packing import node_of

pytestmark = pytest.mark.slurm

TYPES = """  partitions = { batch = { types = {
    { gpus = 8, models = { a100 = 8 }, nodes = 2, cpus = 32, mem = 64000,
      hosts = "node[01-02]", kept = true },
    { gpus = 8, models = { ["a100-80g"] = 8 }, nodes = 1, cpus = 32, mem = 64000,
      hosts = "node03", kept = true },
    { gpus = 8, models = { h100 = 8 }, nodes = 1, cpus = 32, mem = 64000,
      hosts = "node04" } } } },
"""
ALWAYS = "  short_first = { share = 0.25, span = 600, keep = { demand = 0, window = 60 } },\n"
DEMAND = "  short_first = { share = 0.25, span = 600, keep = { demand = 0.3, window = 60 } },\n"


@pytest.fixture
def keep(installed: Installed, tmp_path: Path) -> Iterator[Cluster]:
    c = installed.cluster
    with table_with(c, tmp_path, ALWAYS + TYPES):
        yield c


@pytest.fixture
def keep_under_demand(installed: Installed, tmp_path: Path) -> Iterator[Cluster]:
    c = installed.cluster
    with table_with(c, tmp_path, DEMAND + TYPES):
        yield c


def _excluded(c: Cluster, *opts: str) -> str:
    rc, job, err = c.sbatch("-H", *opts)
    assert rc == 0, err
    return c.job_field(job, "ExcNodeList")


def test_other_jobs_get_the_kept_nodes_in_their_exclude(keep: Cluster) -> None:
    c = keep
    assert _excluded(c, "--gres=gpu:1", "-t", "5") == "node[01-03]"
    assert _excluded(c, "-c", "1", "-t", "5") == "node[01-03]"  # CPUs only
    assert _excluded(c, "--gres=gpu:1", "-x", "node04") == "node04"  # the user's own, alone
    assert _excluded(c, "--gres=gpu:a100-80g:1") == "(null)"  # only node03 holds it
    assert _excluded(c, "--gres=gpu:1", "-w", "node03") == "(null)"  # names its node


def test_slurm_keeps_the_job_off_the_kept_nodes(keep: Cluster) -> None:
    """node01-03 excluded by the script: the job can only start on node04, and does."""
    c = keep
    rc, job, err = c.sbatch("-c", "1", "-t", "5")
    assert rc == 0, err
    assert node_of(c, job) == "node04"


def test_under_demand_the_scarce_submissions_turn_it_on(keep_under_demand: Cluster) -> None:
    """Three kept nodes, a 60-minute window, demand 0.3 (54 node-minutes): nothing is kept
    until a job only node03 holds asks for 100 minutes (counted as the window's 60); from
    the next submission on it is."""
    c = keep_under_demand
    assert _excluded(c, "--gres=gpu:1", "-t", "5") == "(null)"
    assert _excluded(c, "--gres=gpu:a100-80g:1", "-t", "100") == "(null)"  # scarce itself
    assert _excluded(c, "--gres=gpu:1", "-t", "5") == "node[01-03]"
