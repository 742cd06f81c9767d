"""gcpause.paused: no cyclic collection inside, the collector as it was after."""

from __future__ import annotations

import gc

import pytest

from slurm_defrag.gcpause import paused


def test_the_collector_is_off_inside_and_back_on_after() -> None:
    assert gc.isenabled()
    with paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_an_error_inside_turns_it_back_on() -> None:
    with pytest.raises(ValueError, match="x"), paused():
        raise ValueError("x")
    assert gc.isenabled()


def test_a_collector_already_off_stays_off() -> None:
    gc.disable()
    try:
        with paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
