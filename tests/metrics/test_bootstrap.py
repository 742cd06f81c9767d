"""The bootstrap of a before/after difference (metrics/bootstrap.py): seeded, block-wise."""

from __future__ import annotations

import pytest

from slurm_defrag.metrics.bootstrap import DAY, Blocks, Resampler, block_seconds


def test_estimates_are_ratios_of_sums() -> None:
    assert Blocks((2.0, 4.0, 0.0), (1.0, 1.0, 0.0)).estimate() == 3.0
    assert Blocks((0.0,), (0.0,)).estimate() is None
    with pytest.raises(ValueError, match="one weight per block"):
        Blocks((1.0,), ())


def test_the_interval_holds_the_difference_and_one_seed_gives_one_interval() -> None:
    before = Blocks(tuple(float(10 + i % 3) for i in range(24)), (1.0,) * 24)
    after = Blocks(tuple(float(6 + i % 4) for i in range(24)), (1.0,) * 24)
    iv = Resampler(1000, seed=7).compare(before, after)
    assert iv.difference == pytest.approx(after.estimate() - before.estimate())  # type: ignore[operator]
    assert iv.low is not None
    assert iv.high is not None
    assert iv.low <= iv.difference <= iv.high < 0
    assert Resampler(1000, seed=7).compare(before, after) == iv
    assert Resampler(1000, seed=8).compare(before, after) != iv


def test_no_difference_between_equal_periods_is_inside_the_interval() -> None:
    blocks = Blocks(tuple(float(i % 5) for i in range(30)), (1.0,) * 30)
    iv = Resampler(500, seed=0).compare(blocks, blocks)
    assert iv.difference == 0
    assert iv.low is not None
    assert iv.high is not None
    assert iv.low < 0 < iv.high


def test_missing_data_gives_no_difference_and_no_resamples_no_interval() -> None:
    empty = Blocks((0.0, 0.0), (0.0, 0.0))
    full = Blocks((1.0, 2.0), (1.0, 1.0))
    assert Resampler().compare(empty, full).difference is None
    iv = Resampler(0).compare(full, full)
    assert (iv.difference, iv.low, iv.high) == (0.0, None, None)
    assert iv.scaled(24).before == 1.5 * 24


def test_block_length_rule() -> None:
    assert block_seconds(14 * DAY) == DAY  # a week or more: whole days
    assert block_seconds(2 * DAY) == 2 * DAY / 24
    assert block_seconds(15 * 60, step_s=60) == 60  # never under one snapshot step
