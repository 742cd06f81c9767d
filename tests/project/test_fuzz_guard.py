"""The fuzz tests' guard (tests/fuzzing.py) catches what it is there to catch: a case that
grows memory past the bound, an error that is not ours, a message over several lines.
Both ways of measuring memory are checked: the resident-set peak (Linux) and tracemalloc."""

from __future__ import annotations

import pytest

import fuzzing
from fuzzing import MAX_PEAK_BYTES, assert_clean
from infra import IN_CI
from slurm_defrag.errors import DefragError

BIG = 2 * MAX_PEAK_BYTES


def _bytes_blow_up() -> int:
    block = b"x" * BIG  # written, so resident
    return len(block)


def _list_blow_up() -> int:
    items = list(range(BIG // 32))  # small Python objects: pymalloc, not one malloc
    return len(items)


def _small() -> int:
    return len(list(range(1000)))


def _multi_line() -> None:
    raise DefragError("first line\nsecond line")


def _not_ours() -> None:
    raise KeyError("nodes")


@pytest.fixture(params=["rss", "tracemalloc"])
def measure(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "rss":
        if not fuzzing.RSS_PEAK:
            if IN_CI:  # CI runs on Linux: the resident-set bound is what CI's fuzz uses
                pytest.fail("no writable /proc/self/clear_refs on a CI machine")
            pytest.skip("no /proc/self/clear_refs here: the tracemalloc case covers it")
    else:
        monkeypatch.setattr(fuzzing, "RSS_PEAK", False)
    return str(request.param)


@pytest.mark.parametrize("blow_up", [_bytes_blow_up, _list_blow_up])
def test_a_case_past_the_memory_bound_fails(measure: str, blow_up: object) -> None:
    with pytest.raises(AssertionError, match="MiB for one input"):
        assert_clean(blow_up)  # type: ignore[arg-type]


def test_a_small_case_passes_and_returns_its_value(measure: str) -> None:
    assert assert_clean(_small) == 1000


def test_an_earlier_tests_freed_memory_does_not_hide_a_blow_up(measure: str) -> None:
    """Memory freed just before (and kept by the allocator) must not absorb the case's growth."""
    freed = [bytes(4096) for _ in range(BIG // 4096)]
    del freed
    with pytest.raises(AssertionError, match="MiB for one input"):
        assert_clean(_list_blow_up)


def test_free_small_objects_do_not_hide_a_blow_up(measure: str) -> None:
    """pymalloc keeps arenas with a live object in them: the free blocks around it are
    reused without the resident set growing. Counted, or the case goes to tracemalloc."""
    kept = [str(i) for i in range(2_000_000)]
    del kept[1::2]  # half the blocks free, every arena still in use
    with pytest.raises(AssertionError, match="MiB for one input"):
        assert_clean(_list_blow_up)
    assert len(kept) == 1_000_000


def test_a_multi_line_message_fails(measure: str) -> None:
    with pytest.raises(AssertionError, match="multi-line"):
        assert_clean(_multi_line)


def test_an_error_that_is_not_ours_propagates(measure: str) -> None:
    with pytest.raises(KeyError):
        assert_clean(_not_ours)
