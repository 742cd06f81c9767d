"""The floors of ``bench/sim_wait_bound.py`` (docs/benchmarks.md quotes them to say which
Protocol B goals no lever can reach): checked on instances small enough to solve by hand."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_defrag.sim import protocol_b as pb
from slurm_defrag.sim.model import JobSpec

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import sim_wait_bound as wb  # noqa: E402

BIG = wb.Group(cpu_milli=128_000, memory_mib=786_432, gpus=8, model="g3", count=1)
SMALL = wb.Group(cpu_milli=96_000, memory_mib=393_216, gpus=8, model="g2", count=19)
WINDOW = pb.SettingsB(warmup=0.0, horizon=10**6)


def _big(submit: float, duration: float) -> JobSpec:
    return JobSpec("b", 120_000, 500_000, 8, 1000, submit=submit, duration=duration)


def test_two_jobs_for_one_node_wait_one_run_time() -> None:
    """Two 600 s jobs arrive together for the one node that holds them: one waits 600 s
    whatever the order, preemption or no; the bound may lose at most a slot to rounding."""
    jobs = [_big(0.0, 600.0), _big(0.0, 600.0)]
    assert wb.submit_order_floor(jobs, [SMALL, BIG], 20, WINDOW) == 600.0
    bound = wb.wait_bound(jobs, [SMALL, BIG], slot=60.0)
    assert 600.0 - 2 * 60.0 <= bound <= 600.0


def test_a_job_that_fits_everywhere_is_not_scarce_and_a_lone_job_waits_nothing() -> None:
    common = JobSpec("c", 64_000, 100_000, 8, 1000, submit=0.0, duration=600.0)
    assert wb.scarce([common, _big(0.0, 60.0)], [SMALL, BIG], 20) == [_big(0.0, 60.0)]
    assert wb.wait_bound([_big(100.0, 600.0)], [SMALL, BIG], slot=60.0) == 0.0


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3000), st.integers(60, 3000)), min_size=1, max_size=6))
def test_the_any_order_bound_never_exceeds_the_submit_order_floor(
    arrivals: list[tuple[int, int]],
) -> None:
    """Submit order is one schedule among all, so the lower bound over all of them can
    only be lower (both count the same jobs on the one node that holds them)."""
    jobs = [_big(float(s), float(d)) for s, d in arrivals]
    floor = wb.submit_order_floor(jobs, [SMALL, BIG], 20, WINDOW)
    assert wb.wait_bound(jobs, [SMALL, BIG], slot=60.0) <= floor + 1e-6
