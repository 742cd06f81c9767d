"""The queue-order boost in the simulator, capped as ``plugins render`` caps it on a site
(issue #41 item 2): 10 % of the priority model's range by default, ``~cap<P>`` P %,
``~nocap`` the raw boost; without a priority model the raw boost (no range)."""

from __future__ import annotations

import pytest

from slurm_defrag.errors import InputError
from slurm_defrag.packing.node_levers import SHORT_FIRST_SPAN, LeverSettings, short_first_entry
from slurm_defrag.packing.queue_order import capped
from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.levers import SlurmMode, boost_cap, parse_mode, short_first_of
from slurm_defrag.sim.model import JobSpec, NodeSpec
from slurm_defrag.sim.multifactor import MultifactorConfig
from slurm_defrag.sim.site_priority import PRESETS
from slurm_defrag.sim.submit_hook import SubmitHook, node_table

SITE = MultifactorConfig(
    weight_age=1000, weight_fairshare=10000, weight_jobsize=1000, weight_partition=1000
)


def mode(name: str) -> SlurmMode:
    m = parse_mode(name)
    assert m is not None
    return m


def test_the_cap_is_parsed_with_a_queue_order_only() -> None:
    m = mode("slurm+shape-weights~short-all~keep~cap10")
    assert (m.boost_cap, m.short_first, m.keep, m.uncapped) == (0.1, "all", 0.5, False)
    assert m.lever.lever == "shape-weights"
    assert mode("slurm+shape-weights~short-all").boost_cap is None
    assert mode("slurm+shape-weights~short~nocap").uncapped
    for bad in (
        "slurm+shape-weights~cap10",
        "slurm+shape-weights~short~cap0",
        "slurm+shape-weights~nocap",
        "slurm+shape-weights~short~cap10~nocap",
    ):
        with pytest.raises(ValueError, match="cap"):
            parse_mode(bad)


def test_the_cap_is_the_share_of_the_weight_sum_as_render_computes_it() -> None:
    assert SITE.priority_range().points == SITE.weight_sum == 13000
    assert boost_cap(mode("slurm+shape-weights~short-all~cap10"), SITE) == 1300
    assert boost_cap(mode("slurm+shape-weights~short-all~cap25"), SITE) == 3250
    # by default the product's 10 %, under the site preset too
    assert boost_cap(mode("slurm+shape-weights~short-all"), SITE) == 1300
    assert boost_cap(mode("slurm+shape-weights~short-all"), PRESETS["site"]) == 1300
    assert boost_cap(mode("slurm+shape-weights~short-all~nocap"), SITE) is None
    # no priority model: no range, the raw boost (the figures of before #41 stand)
    assert boost_cap(mode("slurm+shape-weights~short-all"), None) is None
    with pytest.raises(InputError, match="needs a priority"):
        boost_cap(mode("slurm+shape-weights~short-all~cap10"), None)
    entry = short_first_of(mode("slurm+shape-weights~short-all"), SITE)
    assert entry is not None
    assert entry["cap"] == 1300
    assert "cap" not in (short_first_of(mode("slurm+shape-weights~short-all")) or {})


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
