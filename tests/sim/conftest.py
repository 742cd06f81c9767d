"""Tiny synthetic clusters and traces for the simulator tests."""

from __future__ import annotations

import pytest
from simkit import job, node

from slurm_defrag.sim.model import JobSpec, NodeSpec


@pytest.fixture
def small_nodes() -> list[NodeSpec]:
    return [node("n0", 8), node("n1", 8), node("n2", 2, cpu=32_000), node("n3", 4, model="B")]


@pytest.fixture
def small_trace() -> list[JobSpec]:
    shapes = [(1, 1000), (1, 500), (1, 250), (2, 1000), (0, 0), (1, 810), (4, 1000), (1, 1000)]
    return [
        job(
            f"p{i:03d}",
            num=n,
            milli=m,
            cpu=2000 + 500 * (i % 5),
            submit=float(i * 7),
            duration=60.0 + 30 * (i % 11),
        )
        for i, (n, m) in enumerate(shapes * 6)
    ]
