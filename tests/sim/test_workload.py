from __future__ import annotations

import numpy as np
from simkit import job, node

from slurm_defrag.sim.timed_workload import arrival_rate, arrivals, job_pool, scale_cluster
from slurm_defrag.sim.workload import inflate


def test_inflate_reaches_the_ratio_without_passing_it(small_trace) -> None:  # type: ignore[no-untyped-def]
    cap = 60_000
    jobs = inflate(small_trace, cap, 1.3, np.random.default_rng(0))
    total = sum(j.total_milli for j in jobs)
    assert 1.3 * cap - 1000 < total <= 1.3 * cap + 3000  # a multi-GPU draw may overshoot
    assert {j.name for j in small_trace} <= {j.name for j in jobs}


def test_inflate_tunes_down_a_large_trace(small_trace) -> None:  # type: ignore[no-untyped-def]
    jobs = inflate(small_trace, 10_000, 1.0, np.random.default_rng(0))
    assert sum(j.total_milli for j in jobs) <= 10_000


def test_scale_keeps_every_shape() -> None:
    nodes = [node(f"a{i}", 8) for i in range(16)] + [node(f"b{i}", 2) for i in range(8)]
    kept = scale_cluster(nodes, 0.25)
    assert [n.name for n in kept] == ["a0", "a1", "a10", "a11", "b0", "b1"]


def test_poisson_rate_gives_the_offered_load() -> None:
    pool = job_pool([job("a", duration=100.0), job("b", num=2, duration=0.0)], max_runtime=50.0)
    assert [j.duration for j in pool] == [50.0, 1.0]
    rate = arrival_rate(pool, 8000, 1.0)
    assert abs(rate - 8000 / ((1000 * 50 + 2000 * 1) / 2)) < 1e-12
    out = arrivals(pool, rate, 3600.0, np.random.default_rng(0))
    assert out == sorted(out, key=lambda j: j.submit)
    assert len(out) > 100
