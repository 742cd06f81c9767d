"""Protocol B's tail figures, classes and priority option (sim/protocol_b.py)."""

from __future__ import annotations

import pytest

from slurm_defrag.errors import InputError
from slurm_defrag.sim.configuration import configure
from slurm_defrag.sim.model import JobSpec, NodeSpec
from slurm_defrag.sim.protocol_b import SettingsB, run_b
from slurm_defrag.sim.results import worst_classes
from slurm_defrag.suite import engine_config

ALL = {"short_first": 0.1, "short_first_all": True, "large_first": 4}


def _settings(priority: str = "none") -> SettingsB:
    return SettingsB(
        load=1.3,
        horizon=3600.0,
        warmup=600.0,
        max_runtime=600.0,
        user_limits=True,
        engine=engine_config("all"),
        priority=priority,
    )


def test_every_run_reports_the_tail_and_the_classes(
    small_nodes: list[NodeSpec], small_trace: list[JobSpec]
) -> None:
    r = run_b(small_nodes, small_trace, "first-fit", seed=3, settings=_settings())
    assert 0 <= r.wait_p50_s <= r.wait_p95_s <= r.wait_p99_s <= r.wait_max_s
    assert sum(r.class_jobs[f"limit Q{q}"] for q in range(1, 5)) == r.jobs
    assert sum(n for k, n in r.class_jobs.items() if k.startswith("gpus")) == r.jobs
    users = [k for k in r.class_wait_s if k.startswith("user ")]
    assert 1 <= len(users) <= 10
    assert r.priority == "none"


def test_multifactor_reorders_the_queue_and_stays_deterministic(
    small_nodes: list[NodeSpec], small_trace: list[JobSpec]
) -> None:
    fifo = run_b(small_nodes, small_trace, "first-fit", seed=3, settings=_settings())
    a = run_b(small_nodes, small_trace, "first-fit", seed=3, settings=_settings("site"))
    b = run_b(small_nodes, small_trace, "first-fit", seed=3, settings=_settings("site"))
    strip = lambda r: {k: v for k, v in r.__dict__.items() if k != "wall_s"}  # noqa: E731
    assert strip(a) == strip(b)
    assert a.priority == "site"
    assert a.jobs == fifo.jobs  # the same arrivals...
    assert a.class_wait_s != fifo.class_wait_s  # ...in another order


def test_the_worst_class_is_against_first_fit_of_the_same_seed(
    small_nodes: list[NodeSpec], small_trace: list[JobSpec]
) -> None:
    s = _settings("site")
    short = configure("short-all", placement={"lever": "shape-weights"}, job_submit=ALL)
    runs = [
        run_b(small_nodes, small_trace, p, seed=3, settings=s)
        for p in ("first-fit", short.placement)
    ]
    worst = worst_classes(runs)
    assert list(worst) == [(1.3, "short-all", "none")]
    ((name, ratio),) = worst[(1.3, "short-all", "none")]
    assert ratio == pytest.approx(runs[1].class_wait_s[name] / runs[0].class_wait_s[name])


def test_an_unknown_priority_or_a_cap_without_one_is_refused(
    small_nodes: list[NodeSpec], small_trace: list[JobSpec]
) -> None:
    with pytest.raises(InputError, match="priority 'fifo'"):
        run_b(small_nodes, small_trace, "first-fit", seed=3, settings=_settings("fifo"))
    capped = configure(placement={"lever": "shape-weights"}, job_submit={**ALL, "boost_cap": 0.1})
    with pytest.raises(InputError, match="needs a priority"):
        run_b(small_nodes, small_trace, capped.placement, 3, _settings())
