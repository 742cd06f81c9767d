"""The wait tail and per-class means of Protocol B (sim/wait_classes.py)."""

from __future__ import annotations

import math

import pytest
from simkit import job

from slurm_defrag.sim.wait_classes import (
    Tail,
    class_means,
    class_ratios,
    classes,
    gpu_class,
    heavy_users,
    ratio,
    worst_class,
)


def test_tail_percentiles_interpolate_between_order_statistics() -> None:
    t = Tail.of([float(x) for x in range(101)])  # 0..100
    assert (t.mean, t.p50, t.p95, t.p99, t.max) == pytest.approx((50, 50, 95, 99, 100))
    t = Tail.of([0.0, 10.0])
    assert t.p95 == pytest.approx(9.5)
    assert Tail.of([]) == Tail()


def test_gpu_classes() -> None:
    assert [gpu_class(job("j", num=n)) for n in (0, 1, 2, 3, 4, 7, 8, 16)] == [
        "gpus 0", "gpus 1", "gpus 2-3", "gpus 2-3", "gpus 4-7", "gpus 4-7", "gpus 8+", "gpus 8+",
    ]  # fmt: skip
    assert gpu_class(job("share", num=1, milli=300)) == "gpus 1"


def test_limit_quarters_are_equal_parts_by_limit_then_submission() -> None:
    limits = [600.0, 60.0, 60.0, 3600.0, 60.0, 7200.0, 600.0, 60.0]
    jobs = [job(f"j{i}", time_limit=t) for i, t in enumerate(limits)]
    c = classes(jobs)
    # by limit, ties by index: 1, 2, 4, 7 (60 s) | 0, 6 (600 s) | 3 | 5
    assert c["limit Q1"] == [1, 2]
    assert c["limit Q2"] == [4, 7]
    assert c["limit Q3"] == [0, 6]
    assert c["limit Q4"] == [3, 5]


def test_the_heaviest_users_by_gpu_hours_asked() -> None:
    jobs = [
        job("a", num=8, duration=3600.0, user="big"),
        job("b", num=1, duration=3600.0, user="small"),
        job("c", num=1, duration=7200.0, user="mid"),
        job("d", num=0, duration=1e6, user="cpu"),
    ]
    assert heavy_users(jobs, 2) == ["big", "mid"]
    assert heavy_users([job("x")]) == []


def test_class_means_and_counts() -> None:
    jobs = [job("a", num=1, user="u"), job("b", num=8, user="u"), job("c", num=1, user="v")]
    means, counts = class_means(jobs, [10.0, 100.0, 40.0])
    assert means["gpus 1"] == pytest.approx(25.0)
    assert means["gpus 8+"] == pytest.approx(100.0)
    assert means["user u"] == pytest.approx(55.0)
    assert counts["gpus 1"] == 2
    assert "gpus 4-7" not in means  # no job in that class


def test_ratios_leave_out_classes_the_baseline_barely_has() -> None:
    base_means = {"gpus 1": 100.0, "gpus 8+": 50.0, "user u": 10.0}
    base_counts = {"gpus 1": 500, "gpus 8+": 5, "user u": 40}
    means = {"gpus 1": 80.0, "gpus 8+": 500.0, "user u": 13.0}
    r = class_ratios(means, base_means, base_counts, min_jobs=20)
    assert r == pytest.approx({"gpus 1": 0.8, "user u": 1.3})
    assert worst_class(r) == ("user u", pytest.approx(1.3))
    assert worst_class({}) == ("", 1.0)


def test_ratio_of_nothing_to_nothing_is_one() -> None:
    assert ratio(0.0, 0.0) == 1.0
    assert ratio(5.0, 0.0) == math.inf
    assert ratio(5.0, 10.0) == 0.5
