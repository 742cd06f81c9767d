"""priority/multifactor's factors (sim/multifactor.py), as slurmctld and sprio compute them."""

from __future__ import annotations

import math

import pytest

from slurm_defrag.sim.multifactor import (
    ClusterSize,
    JobFactors,
    MultifactorConfig,
    decay_per_second,
    job_factors,
    steady_usage,
)

CFG = MultifactorConfig(
    weight_age=1000,
    weight_fairshare=10000,
    weight_jobsize=1000,
    weight_partition=1000,
    max_age_s=1000,
)
CLUSTER = ClusterSize(nodes=4, cpus=128)


def test_every_factor_times_its_weight_less_the_nice() -> None:
    f = job_factors(CFG, waited_s=250, fairshare=0.5, nodes=1, cpus=32, cluster=CLUSTER, nice=-300)
    assert (f.age, f.fairshare, f.jobsize, f.partition, f.qos) == pytest.approx(
        (250, 5000, 250, 1000, 0)  # job size: (1/4 nodes + 32/128 CPUs) / 2
    )
    assert f.priority == 250 + 5000 + 250 + 1000 + 300


def test_favor_small_turns_the_job_size_factor_around() -> None:
    small = MultifactorConfig(weight_jobsize=1000, favor_small=True)
    f = job_factors(small, waited_s=0, fairshare=0, nodes=1, cpus=32, cluster=CLUSTER)
    assert f.jobsize == pytest.approx(750)  # (3/4 + 96/128) / 2


def test_age_grows_to_max_age_and_stops() -> None:
    waits = (-5, 0, 500, 1000, 5000)
    ages = [
        job_factors(CFG, waited_s=w, fairshare=0, nodes=1, cpus=1, cluster=CLUSTER).age
        for w in waits
    ]
    assert ages == pytest.approx([0, 0, 500, 1000, 1000])


def test_the_priority_is_cut_to_an_integer_and_never_below_one() -> None:
    assert JobFactors(age=0.9, fairshare=6799.9).priority == 6800
    assert JobFactors(age=0.5, fairshare=6799.9).priority == 6800  # 6800.4 cut, not rounded
    assert JobFactors(fairshare=10, nice=100_000).priority == 1
    assert JobFactors().priority == 1  # no weights at all: every job at 1, as Slurm shows


def test_sprio_prints_each_factor_rounded_half_to_even() -> None:
    printed = JobFactors(age=2.5, fairshare=3.5, jobsize=0.49, nice=-7).printed()
    assert (printed["age"], printed["fairshare"], printed["jobsize"], printed["nice"]) == (
        2,
        4,
        0,
        -7,
    )
    assert printed["priority"] == 13  # 2.5 + 3.5 + 0.49 + 7 = 13.49, cut


def test_weight_sum_is_the_site_priority_range() -> None:
    assert CFG.weight_sum == 13000


def test_slurm_decays_with_its_first_order_factor() -> None:
    cfg = MultifactorConfig(decay_half_life_s=693.0)
    assert decay_per_second(cfg) == pytest.approx(0.999)
    assert decay_per_second(MultifactorConfig(decay_half_life_s=0)) == 1.0
    assert steady_usage(2.0, cfg) == pytest.approx(2.0 / -math.log(0.999))


def test_negative_weights_are_refused() -> None:
    with pytest.raises(ValueError, match="0 or more"):
        MultifactorConfig(weight_age=-1)
