"""The queue-order boost in the simulator, capped as ``plugins render`` caps it on a site
(issue #41 item 2): 10 % of the priority model's range by default, ``~cap<P>`` P %,
``~nocap`` the raw boost; without a priority model the raw boost (no range)."""

from __future__ import annotations

import pytest

from slurm_defrag.errors import InputError
from slurm_defrag.packing.node_levers import SHORT_FIRST_SPAN, LeverSettings, short_first_entry
from slurm_defrag.packing.queue_order import capped
from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.configuration import configure
from slurm_defrag.sim.levers import SlurmMode, boost_cap, short_first_of
from slurm_defrag.sim.model import JobSpec, NodeSpec
from slurm_defrag.sim.multifactor import MultifactorConfig
from slurm_defrag.sim.site_priority import PRESETS
from slurm_defrag.sim.submit_hook import SubmitHook, node_table

SITE = MultifactorConfig(
    weight_age=1000, weight_fairshare=10000, weight_jobsize=1000, weight_partition=1000
)


SHORT = {"short_first": 0.1}
ALL = {"short_first": 0.1, "short_first_all": True, "large_first": 4}


def mode(**job_submit: object) -> SlurmMode:
    m = configure(placement={"lever": "shape-weights"}, job_submit=job_submit).placement.mode
    assert m is not None
    return m


def test_the_cap_is_taken_with_a_queue_order_only() -> None:
    m = mode(**ALL, keep_scarce=0.5, boost_cap=0.1)
    assert (m.boost_cap, m.short_first, m.keep, m.uncapped) == (0.1, "all", 0.5, False)
    assert m.lever.lever == "shape-weights"
    assert mode(**ALL).boost_cap is None
    assert mode(**SHORT, uncapped_boost=True).uncapped
    for bad in (
        {"boost_cap": 0.1},
        {**SHORT, "boost_cap": 0},
        {"uncapped_boost": True},
        {**SHORT, "boost_cap": 0.1, "uncapped_boost": True},
    ):
        with pytest.raises(InputError, match=r"boost_cap|uncapped_boost"):
            mode(**bad)


def test_the_cap_is_the_share_of_the_weight_sum_as_render_computes_it() -> None:
    assert SITE.priority_range().points == SITE.weight_sum == 13000
    assert boost_cap(mode(**ALL, boost_cap=0.1), SITE) == 1300
    assert boost_cap(mode(**ALL, boost_cap=0.25), SITE) == 3250
    # by default the product's 10 %, under the site preset too
    assert boost_cap(mode(**ALL), SITE) == 1300
    assert boost_cap(mode(**ALL), PRESETS["site"]) == 1300
    assert boost_cap(mode(**ALL, uncapped_boost=True), SITE) is None
    # no priority model: no range, the raw boost (the figures of before #41 stand)
    assert boost_cap(mode(**ALL), None) is None
    with pytest.raises(InputError, match="needs a priority"):
        boost_cap(mode(**ALL, boost_cap=0.1), None)
    entry = short_first_of(mode(**ALL), SITE)
    assert entry is not None
    assert entry["cap"] == 1300
    assert "cap" not in (short_first_of(mode(**ALL)) or {})


def test_the_hook_gives_the_capped_boost() -> None:
    nodes = [NodeSpec(f"s{i}", 96_000, 393_216, 8, "g2") for i in range(9)]
    state = ClusterState([*nodes, NodeSpec("big", 128_000, 786_432, 8, "g3")])
    big = JobSpec("j", 120_000, 500_000, 8, 1000, time_limit=5400.0)
    raw_entry = short_first_entry(0.1)
    full = SubmitHook(node_table(state, LeverSettings("shape-weights"), short_first=raw_entry))
    raw = full.apply(big).priority
    assert raw == 3 * SHORT_FIRST_SPAN - 90
    entry = short_first_entry(0.1, cap=1300)
    hook = SubmitHook(node_table(state, LeverSettings("shape-weights"), short_first=entry))
    assert hook.apply(big).priority == capped(raw, 1300, SHORT_FIRST_SPAN) == 1296
