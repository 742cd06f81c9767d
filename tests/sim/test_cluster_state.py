from __future__ import annotations

import pytest
from simkit import job, node

from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.model import JobSpec, Placement


def test_allocate_and_release_restore_state() -> None:
    s = ClusterState([node("a", 2), node("b", 4)])
    j = job("x", num=1, milli=300)
    s.allocate(j, Placement(1, (2,)))
    assert s.gpu_left[1, 2] == 700
    assert s.allocated_gpu_milli() == 300
    assert s.version[1] == 1
    s.release(j, Placement(1, (2,)))
    assert s.allocated_gpu_milli() == 0
    assert s.version[1] == 2


def test_allocate_refuses_busy_gpu() -> None:
    s = ClusterState([node("a", 2)])
    s.allocate(job("x"), Placement(0, (0,)))
    with pytest.raises(ValueError, match="not free"):
        s.allocate(job("y"), Placement(0, (0,)))


def test_feasible_checks_cpu_memory_gpus_and_model() -> None:
    s = ClusterState([node("a", 2, cpu=8000), node("b", 4, model="B"), node("c", 8, mem=1000)])
    assert s.feasible(job("cpu-heavy", cpu=10_000)).tolist() == [False, True, False]
    assert s.feasible(job("mem", mem=2000)).tolist() == [True, True, False]
    assert s.feasible(job("four", num=4)).tolist() == [False, True, False]
    only_a = JobSpec("m", 1000, 10, 1, 1000, gpu_models=frozenset({"A"}))
    assert s.feasible(only_a).tolist() == [True, False, True]
    assert s.feasible(job("cpu-only", num=0)).tolist() == [True, True, False]


def test_nvlink_jobs_need_a_free_block() -> None:
    s = ClusterState([node("pairs", 4, topology="nvlink-pairs-4"), node("pcie", 4)])
    pair = job("pair", num=2, nvlink=True)
    assert s.feasible(pair).tolist() == [True, False]
    assert not s.feasible(job("quad", num=4, nvlink=True)).any()
    s.allocate(job("x"), Placement(0, (0,)))
    s.allocate(job("y"), Placement(0, (2,)))
    assert not s.feasible(pair)[0]  # two GPUs free, but not a linked pair


def test_job_spec_validation() -> None:
    with pytest.raises(ValueError, match="whole GPUs"):
        JobSpec("bad", 1, 1, num_gpu=2, gpu_milli=500)
    with pytest.raises(ValueError, match="both be zero"):
        JobSpec("bad", 1, 1, num_gpu=1, gpu_milli=0)
