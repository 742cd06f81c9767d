"""The queue-order lever's bound (issue #41 item 2): the site's priority range as slurm.conf
or ``scontrol show config`` state it, the cap, and the capped boost."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_defrag.errors import InputError
from slurm_defrag.packing.node_levers import SHORT_FIRST_SPAN
from slurm_defrag.packing.queue_order import NICE_LIMIT, PriorityRange, capped, read_range

# as 24.11's `scontrol show config` prints them (tests/fixtures/*/scontrol_show_config.txt),
# after controller.parse_show_config: (null) is ""
LIVE = {
    "PriorityType": "priority/multifactor",
    "PriorityWeightAge": "1000",
    "PriorityWeightAssoc": "0",
    "PriorityWeightFairShare": "10000",
    "PriorityWeightJobSize": "1000",
    "PriorityWeightPartition": "1000",
    "PriorityWeightQOS": "0",
    "PriorityWeightTRES": "",
}


def test_the_range_is_the_sum_of_the_weights() -> None:
    r = read_range(LIVE, "scontrol show config")
    assert r.points == 13000
    assert r.cap(0.1) == 1300
    assert r.describe() == "Age=1000,FairShare=10000,JobSize=1000,Partition=1000"
    assert not r.basic


def test_slurm_conf_keys_in_any_case_and_tres_weights() -> None:
    r = read_range(
        {
            "prioritytype": "priority/multifactor",
            "priorityweightfairshare": "10000",
            "priorityweighttres": "CPU=1000,Mem=2000,GRES/gpu=3000.5",
        },
        "slurm.conf",
    )
    assert r.points == 16000
    assert r.describe() == "FairShare=10000,TRES/CPU=1000,TRES/Mem=2000,TRES/GRES/gpu=3000.5"


def test_basic_has_no_range_and_unset_is_the_release_default() -> None:
    basic = read_range({"PriorityType": "priority/basic", "PriorityWeightAge": "1000"}, "x")
    assert basic.basic
    assert (basic.points, basic.cap(0.5)) == (0, 0)
    unset = read_range({"PriorityWeightAge": "1000"}, "x")
    assert unset.plugin is None
    assert not unset.basic
    assert unset.points == 1000
    assert read_range({}, "x").points == 0
    assert read_range({}, "x").describe() == "none"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"PriorityWeightAge": "lots"}, "PriorityWeightAge 'lots' is not a priority weight"),
        ({"PriorityWeightAge": "-1"}, "is not a priority weight"),
        ({"PriorityWeightAge": "inf"}, "is not a priority weight"),
        ({"PriorityWeightAge": str(2**32)}, "is not a priority weight"),
        ({"PriorityWeightTRES": "CPU"}, "PriorityWeightTRES item 'CPU' is not TYPE=weight"),
        ({"PriorityWeightTRES": "CPU=x"}, "PriorityWeightTRES CPU 'x'"),
    ],
)
def test_a_weight_that_is_not_one_is_refused_by_name(
    settings: dict[str, str], message: str
) -> None:
    with pytest.raises(InputError, match=message):
        read_range(settings, "slurm.conf")


def test_the_share_is_checked_and_the_cap_stays_within_slurms_nice() -> None:
    r = PriorityRange("priority/multifactor", (("Age", 2**32 - 1),) * 6)
    assert r.cap(1.0) == NICE_LIMIT
    for bad in (-0.1, 1.01, float("nan")):
        with pytest.raises(InputError, match="--boost-cap"):
            r.cap(bad)


@given(
    raws=st.lists(st.integers(0, 3 * SHORT_FIRST_SPAN), min_size=2, max_size=20),
    cap=st.integers(0, NICE_LIMIT),
)
def test_capped_stays_in_the_cap_and_keeps_the_order(raws: list[int], cap: int) -> None:
    out = [capped(r, cap, SHORT_FIRST_SPAN) for r in raws]
    assert all(0 <= b <= cap for b in out)
    pairs = sorted(zip(raws, out, strict=True))
    assert [b for _, b in pairs] == sorted(out)  # a larger raw never gets a smaller boost
    assert capped(3 * SHORT_FIRST_SPAN, cap, SHORT_FIRST_SPAN) == cap
    assert all(capped(r, 0, SHORT_FIRST_SPAN) == 0 for r in raws)
    assert capped(raws[0], None, SHORT_FIRST_SPAN) == raws[0]  # no cap: the raw boost
