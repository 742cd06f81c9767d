"""Live: a pending job's own ``-w``, ``-x`` and ``--constraint``, as both backends read them.

The planner frees blocks only where a target may run (``domain.job_limits``); this records
how slurmctld prints the three limits back (scontrol text: ReqNodeList, ExcNodeList,
Features; the JSON: required_nodes, excluded_nodes, features) and that the cli and rest
backends read the same thing. node02 carries two features of this test while it runs
(as the packing lever sets them), put back after. The jobs are held: nothing runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from live_cluster import cli_backend, cluster_is_up, ctld, rest_backend, sbatch

from infra import require

pytestmark = pytest.mark.slurm

TAG = uuid.uuid4().hex[:6]
A, B = f"dftest_a{TAG}", f"dftest_b{TAG}"


@pytest.fixture
def node02_features() -> Iterator[None]:
    require(cluster_is_up(), "the compose Slurm cluster")
    before = ctld("scontrol", "show", "node", "node02")
    avail = next(t for t in before.split() if t.startswith("AvailableFeatures="))
    active = next(t for t in before.split() if t.startswith("ActiveFeatures="))
    ctld(
        "scontrol",
        "update",
        "NodeName=node02",
        f"AvailableFeatures={A},{B}",
        f"ActiveFeatures={A},{B}",
    )
    try:
        yield
    finally:
        old = [t.replace("(null)", "") for t in (avail, active)]
        ctld("scontrol", "update", "NodeName=node02", *old)


def test_both_backends_read_the_limits(node02_features: None) -> None:
    asked = {
        ("-x", "node[01-02]"): ("", "node[01-02]", ""),
        ("-w", "node02"): ("node02", "", ""),
        ("-C", f"{A}&{B}"): ("", "", f"{A}&{B}"),
        ("-C", f"{A}|{B}"): ("", "", f"{A}|{B}"),
        ("-x", "node01", "-C", A): ("", "node01", A),
    }
    ids = {opts: sbatch("-H", "-J", f"limits-{TAG}", "--gres=gpu:1", *opts) for opts in asked}
    try:
        for backend in (cli_backend(), rest_backend()):
            jobs = backend.snapshot().job_by_id
            got = {
                opts: (jobs[i].required_nodes, jobs[i].excluded_nodes, jobs[i].constraint)
                for opts, i in ids.items()
            }
            assert got == asked, type(backend).__name__
    finally:
        ctld("scancel", *ids.values(), check=False)
