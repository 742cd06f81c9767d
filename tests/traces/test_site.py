"""A site's accounting and snapshot as the simulator's jobs and nodes (traces/site.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from infra import ROOT
from slurm_defrag.domain.accounting import SiteJob
from slurm_defrag.domain.cluster import ClusterSnapshot, Node
from slurm_defrag.errors import InputError
from slurm_defrag.slurm.parse.sacct import read_site_jobs
from slurm_defrag.snapshot_file import load_snapshot
from slurm_defrag.traces.site import MULTI_NODE, UNTRACKED, inventory, site_workload

FIXTURES = ROOT / "tests" / "fixtures" / "sacct"


def test_the_fixture_site_jobs_on_its_nodes() -> None:
    read = read_site_jobs(FIXTURES / "site.txt")
    site = site_workload(read.jobs, load_snapshot(FIXTURES / "site-snapshot.json"))
    assert [n.name for n in site.nodes] == ["gpu01", "gpu02", "gpu03", "cpu01"]
    gpu01 = site.nodes[0]
    assert (gpu01.gpus, gpu01.model, gpu01.cpu_milli, gpu01.memory_mib) == (
        8,
        "a100",
        64_000,
        512_000,
    )
    assert gpu01.topology == "nvswitch-8"
    assert site.nodes[3].model == "none"
    assert site.left_out == {MULTI_NODE: 1}  # job 104 ran on two nodes
    jobs = {j.name: j for j in site.jobs}
    assert "104" not in jobs
    assert jobs["100"].submit == 0.0  # time 0 is the first submit
    assert jobs["103"].submit == 1800.0  # the requeued job arrives when first submitted
    timeout = jobs["101"]
    assert timeout.gpu_models == frozenset({"h100"})
    assert timeout.time_limit == timeout.duration == 3603.0  # ran past its limit: allowed to
    assert (jobs["100"].cpu_milli, jobs["100"].memory_mib, jobs["100"].num_gpu) == (8000, 65536, 4)
    assert jobs["109"].num_gpu == 0
    assert site.span_s == jobs["111"].submit == 7800.0
    work_h = (4 * 3600 + 2 * 3603 + 1800 + 300 + 8 * 7200 + 12 * 1800) / 3600
    assert site.offered_load == pytest.approx(work_h / (20 * 7800 / 3600))


def test_a_node_without_cpus_or_memory_in_the_snapshot_is_not_limited_by_them() -> None:
    snap = ClusterSnapshot(
        taken_at=datetime(2026, 12, 1, tzinfo=UTC),
        nodes=(Node(name="n1", gpu_model="h100", gpu_count=4, weight=5),),
    )
    [node] = inventory(snap)
    assert (node.cpu_milli, node.memory_mib) == (UNTRACKED, UNTRACKED)
    assert node.topology is None  # PCIe only
    assert node.weight == 5


def test_nothing_to_simulate_is_one_error() -> None:
    snap = load_snapshot(FIXTURES / "site-snapshot.json")
    two_nodes = SiteJob("1", 0.0, 1.0, 60.0, None, nodes=2, gpus=2)
    with pytest.raises(InputError, match="no one-node job"):
        site_workload([two_nodes], snap)
    with pytest.raises(InputError, match="no nodes"):
        site_workload([], ClusterSnapshot(taken_at=datetime(2026, 12, 1, tzinfo=UTC)))
