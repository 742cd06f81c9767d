"""GRES string parsing: every form recorded from Slurm 22.05 / 24.11 (slurm-recordings README).

The parser is the only place that turns ``gpu:a100:4(IDX:0-1,4-5)`` into GPU indices; a
mistake here puts jobs on the wrong GPUs in every later figure, so each recorded form is
pinned with its exact result.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_defrag.domain.gres import (
    GresEntry,
    GresParseError,
    format_index_ranges,
    gpu_entries,
    gpu_indices,
    parse_gres,
    parse_index_ranges,
)
from slurm_defrag.domain.topology import MAX_GPUS_PER_NODE


def fs(*xs: int) -> frozenset[int]:
    return frozenset(xs)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # node GresUsed, a contiguous range (node01 of the recordings: jobs 1 and 2)
        ("gpu:a100:5(IDX:0-4)", [GresEntry("gpu", "a100", 5, fs(0, 1, 2, 3, 4))]),
        # a list of ranges (node02: jobs 3 and 4)
        ("gpu:a100:4(IDX:0-1,4-5)", [GresEntry("gpu", "a100", 4, fs(0, 1, 4, 5))]),
        # a type with a hyphen and digits, single index then a range (node03)
        ("gpu:a100-80g:4(IDX:0,4-6)", [GresEntry("gpu", "a100-80g", 4, fs(0, 4, 5, 6))]),
        # an idle node: count 0 and N/A indices -> an empty set, not None
        ("gpu:a100:0(IDX:N/A)", [GresEntry("gpu", "a100", 0, fs())]),
        # configured GRES keeps the socket part: no indices at all (None)
        ("gpu:a100:8(S:0-1)", [GresEntry("gpu", "a100", 8, None)]),
        # untyped request: the number is the count, not a type
        ("gpu:8", [GresEntry("gpu", None, 8, None)]),
        # TRES spelling (24.11 TresPerNode=gres/gpu:4)
        ("gres/gpu:4", [GresEntry("gpu", None, 4, None)]),
        # 22.05 TresPerNode=gres:gpu:4
        ("gres:gpu:4", [GresEntry("gpu", None, 4, None)]),
        # two types on one node: split on top-level commas only (IDX lists contain commas)
        (
            "gpu:a100:2(IDX:0-1),gpu:h100:1(IDX:3)",
            [GresEntry("gpu", "a100", 2, fs(0, 1)), GresEntry("gpu", "h100", 1, fs(3))],
        ),
        # typed request without count means one
        ("gpu:a100", [GresEntry("gpu", "a100", 1, None)]),
        # a type that starts with a digit is still a type when a count follows
        ("gpu:3g.20gb:2(IDX:0-1)", [GresEntry("gpu", "3g.20gb", 2, fs(0, 1))]),
        # other GRES are parsed too (and filtered out by gpu_entries)
        (
            "gpu:a100:8(S:0-1),shard:4",
            [GresEntry("gpu", "a100", 8, None), GresEntry("shard", None, 4, None)],
        ),
        # surrounding blanks are tolerated
        ("  gpu:h100:4(IDX:0-3) ", [GresEntry("gpu", "h100", 4, fs(0, 1, 2, 3))]),
    ],
)
def test_parse_gres_recorded_forms(text: str, expected: list[GresEntry]) -> None:
    assert parse_gres(text) == expected


@pytest.mark.parametrize("text", [None, "", "   ", "(null)", "N/A"])
def test_parse_gres_empty_forms(text: str | None) -> None:
    """Slurm prints ``(null)`` or ``N/A`` for "no GRES"; JSON may carry null."""
    assert parse_gres(text) == []


@pytest.mark.parametrize(
    ("text", "indices"),
    [
        ("gpu:a100:5(IDX:0-4)", fs(0, 1, 2, 3, 4)),
        ("gpu:a100:4(IDX:0-1,4-5)", fs(0, 1, 4, 5)),
        ("gpu:a100-80g:4(IDX:0,4-6)", fs(0, 4, 5, 6)),
        ("gpu:a100:0(IDX:N/A)", fs()),
        ("gpu:a100:2(IDX:0-1),gpu:h100:1(IDX:3)", fs(0, 1, 3)),
        ("gpu:a100:2(IDX:0-1),shard:4", fs(0, 1)),
        (None, fs()),
    ],
)
def test_gpu_indices(text: str | None, indices: frozenset[int]) -> None:
    assert gpu_indices(text) == indices


@pytest.mark.parametrize(
    "text",
    [
        "gpu:8",  # a non-zero count without IDX: which GPUs? guessing would misplace jobs
        "gpu:a100:8(S:0-1)",  # socket detail is not an index list
        "gpu:a100:4(IDX:0-2)",  # count 4 but 3 indices
    ],
)
def test_gpu_indices_refuses_to_guess(text: str) -> None:
    with pytest.raises(GresParseError):
        gpu_indices(text)


def test_gpu_entries_keeps_only_gpus() -> None:
    assert gpu_entries("shard:4,gpu:a100:1(IDX:2)") == [GresEntry("gpu", "a100", 1, fs(2))]


@pytest.mark.parametrize(
    "text",
    [
        "gpu:a100:4(IDX:0-3",  # unclosed parenthesis
        "gpu:a100:4(IDX:0-3))",  # extra parenthesis
        "gpu:a100:4)",
        "gpu:a100:x",  # count is not a number (and a type cannot follow a type)
        "gpu::4",  # empty type
        ":a100:4",  # no name
        "1gpu:4",  # a name cannot start with a digit
        "gpu a100",  # blank inside an item
        "gpu:a100:-1",  # negative count
        "gpu:a100:4(IDX:3-1)",  # descending range
        "gpu:a100:4(IDX:a-b)",
        "gpu:a100:4(IDX:0--1)",
        "gpu:a100:4(IDX:-1)",
        "gpu:a100:4(IDX:0,,1)",  # empty range between commas
        "gpu:a100:2(IDX:0-1),(x)",  # second item is garbage
    ],
)
def test_malformed_gres_raises(text: str) -> None:
    with pytest.raises(GresParseError) as err:
        parse_gres(text)
    # The message must let a person find the offending input in a log.
    assert text.strip() in str(err.value)


@pytest.mark.parametrize(
    ("text", "indices"),
    [
        ("0", fs(0)),
        ("0-3", fs(0, 1, 2, 3)),
        ("0,4-6", fs(0, 4, 5, 6)),
        ("0-1,4-5", fs(0, 1, 4, 5)),
        ("7,0", fs(0, 7)),  # order in the text does not matter
        ("N/A", fs()),
        ("", fs()),
        ("(null)", fs()),
        ("12-15", fs(12, 13, 14, 15)),
    ],
)
def test_parse_index_ranges(text: str, indices: frozenset[int]) -> None:
    assert parse_index_ranges(text) == indices


@pytest.mark.parametrize(
    ("indices", "text"),
    [
        (fs(), "N/A"),  # the way Slurm prints an idle node
        (fs(3), "3"),
        (fs(0, 1, 2, 3, 4), "0-4"),
        (fs(0, 1, 4, 5), "0-1,4-5"),
        (fs(0, 4, 5, 6), "0,4-6"),
        (fs(0, 2, 4, 6), "0,2,4,6"),
        (fs(1, 2), "1-2"),  # two neighbours are a range, as Slurm prints them
    ],
)
def test_format_index_ranges(indices: frozenset[int], text: str) -> None:
    assert format_index_ranges(indices) == text


index_sets = st.frozensets(st.integers(min_value=0, max_value=63), max_size=24)


@settings(max_examples=200, deadline=None)
@given(index_sets)
def test_index_ranges_round_trip(indices: frozenset[int]) -> None:
    """format -> parse gives the set back, and the formatted text is canonical.

    Canonical: formatting what was parsed reproduces the same text (ranges sorted, maximal,
    never two ranges that touch), so two equal sets always print the same.
    """
    text = format_index_ranges(indices)
    assert parse_index_ranges(text) == indices
    assert format_index_ranges(parse_index_ranges(text)) == text


# GPU indices of one node: 0..MAX_GPUS_PER_NODE-1 (IDX: beyond that is refused).
gpu_index_sets = st.frozensets(st.integers(min_value=0, max_value=MAX_GPUS_PER_NODE - 1))


@settings(max_examples=100, deadline=None)
@given(gpu_index_sets.filter(bool), st.sampled_from(["a100", "a100-80g", "h100", "1g.10gb"]))
def test_gres_string_round_trip(indices: frozenset[int], gpu_type: str) -> None:
    """A GresUsed string built from any GPU index set parses back to exactly that set."""
    text = f"gpu:{gpu_type}:{len(indices)}(IDX:{format_index_ranges(indices)})"
    assert parse_gres(text) == [GresEntry("gpu", gpu_type, len(indices), indices)]
    assert gpu_indices(text) == indices


@pytest.mark.parametrize(
    ("text", "entry"),
    [
        ("gpu:a100:no_consume:8", GresEntry("gpu", "a100", 8, None, no_consume=True)),
        ("gpu:no_consume:2", GresEntry("gpu", None, 2, None, no_consume=True)),
        ("gpu:a100:2K", GresEntry("gpu", "a100", 2048, None)),
        ("shard:g", GresEntry("shard", "g", 1, None)),
    ],
)
def test_slurm_conf_forms_share_the_grammar(text: str, entry: GresEntry) -> None:
    """slurm.conf's ``Gres=`` (no_consume, K/M/G counts) is read by the same parser as
    Slurm's output: one GRES grammar in the code base (issue #17)."""
    assert parse_gres(text) == [entry]
