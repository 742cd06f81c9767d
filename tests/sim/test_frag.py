from __future__ import annotations

import numpy as np
import pytest
from simkit import job, node

from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.frag import FragModel, TaskType, typical_types
from slurm_defrag.sim.model import Placement


def test_node_fragmentation_matches_the_definition() -> None:
    # One 4-GPU node with remainders 1000, 1000, 300, 600 and 10 cores free.
    s = ClusterState([node("a", 4, cpu=10_000)])
    s.allocate(job("x", milli=700, cpu=0), Placement(0, (2,)))
    s.allocate(job("y", milli=400, cpu=0), Placement(0, (3,)))
    types = [
        TaskType(1000, 1, 500, None, 0.5),  # fits: fragment = GPUs below 500 = 300
        TaskType(20_000, 1, 100, None, 0.25),  # too little CPU: fragment = all free = 2900
        TaskType(1000, 0, 0, None, 0.25),  # CPU-only: all free counts = 2900
    ]
    f = FragModel(s, types).cluster_frag(s)
    assert f == pytest.approx(0.5 * 300 + 0.25 * 2900 + 0.25 * 2900)


def test_placement_delta_per_gpu_for_shared_jobs() -> None:
    s = ClusterState([node("a", 2)])
    s.allocate(job("x", milli=600, cpu=0), Placement(0, (0,)))  # remainders 400, 1000
    model = FragModel(s, [TaskType(0, 1, 500, None, 1.0)])
    d = model.placement_delta(s, np.array([0]), job("s", milli=300, cpu=0))
    # On GPU 0 (400 -> 100): fragment 400 -> 100, rise -300. On GPU 1 (1000 -> 700): 400 -> 400.
    assert d[0, 0] == pytest.approx(-300)
    assert d[0, 1] == pytest.approx(0)


def test_typical_types_cover_95_percent_and_sum_to_one() -> None:
    jobs = [job(f"a{i}") for i in range(90)] + [job(f"b{i}", milli=500) for i in range(8)]
    jobs += [job("c", num=2), job("d", num=4)]
    types = typical_types(jobs)
    assert [(t.num_gpu, t.gpu_milli) for t in types] == [(1, 1000), (1, 500)]
    assert sum(t.weight for t in types) == pytest.approx(1.0)
