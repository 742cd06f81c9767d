"""``~cap<P>``: job_submit.lua's boost bounded to P % of the site's priority range (#41)."""

from __future__ import annotations

import pytest

from slurm_defrag.errors import InputError
from slurm_defrag.planner.levers import LeverSettings, short_first_entry
from slurm_defrag.sim.cluster import ClusterState
from slurm_defrag.sim.levers import boost_scale, parse_mode
from slurm_defrag.sim.model import JobSpec, NodeSpec
from slurm_defrag.sim.multifactor import MultifactorConfig
from slurm_defrag.sim.submit_hook import SubmitHook, node_table

SITE = MultifactorConfig(
    weight_age=1000, weight_fairshare=10000, weight_jobsize=1000, weight_partition=1000
)


def test_the_cap_is_parsed_with_a_queue_order_only() -> None:
    mode = parse_mode("slurm+shape-weights~short-all~keep~cap10")
    assert mode is not None
    assert (mode.boost_cap, mode.short_first, mode.keep) == (0.1, "all", 0.5)
    assert mode.lever.lever == "shape-weights"
    assert parse_mode("slurm+shape-weights~short-all").boost_cap is None  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="cap"):
        parse_mode("slurm+shape-weights~cap10")
    with pytest.raises(ValueError, match="cap"):
        parse_mode("slurm+shape-weights~short~cap0")


def test_the_largest_boost_becomes_the_share_of_the_weight_sum() -> None:
    mode = parse_mode("slurm+shape-weights~short-all~cap10")
    assert mode is not None
    scale = boost_scale(mode, SITE)
    assert 3 * 10_080 * scale == pytest.approx(1300)  # 10 % of 13,000
    assert boost_scale(parse_mode("slurm+shape-weights~short-all"), SITE) == 1.0  # type: ignore[arg-type]
    with pytest.raises(InputError, match="needs a priority"):
        boost_scale(mode, None)


def test_the_hook_scales_the_nice_it_reads_back() -> None:
    nodes = [NodeSpec(f"s{i}", 96_000, 393_216, 8, "g2") for i in range(9)]
    state = ClusterState([*nodes, NodeSpec("big", 128_000, 786_432, 8, "g3")])
    table = node_table(state, LeverSettings("shape-weights"), short_first=short_first_entry(0.1))
    big = JobSpec("j", 120_000, 500_000, 8, 1000, time_limit=5400.0)
    full = SubmitHook(table).apply(big).priority
    capped = SubmitHook(table, nice_scale=0.05).apply(big).priority
    assert full == 3 * 10_080 - 90
    assert capped == round(full * 0.05)
