from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from simkit import job, node

from slurm_defrag.sim import gpus
from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.frag import typical_types
from slurm_defrag.sim.model import Placement
from slurm_defrag.sim.placement.base import PolicyContext
from slurm_defrag.sim.placement.registry import POLICIES, build


def _ctx(s: ClusterState) -> PolicyContext:
    return PolicyContext(s, typical_types([job("t"), job("u", milli=500)]), np.arange(s.size))


def test_first_fit_follows_weight_then_node_order() -> None:
    nodes = [node("a", 2), node("b", 2), replace(node("c", 2), weight=0)]
    s = ClusterState(nodes)
    p = build("first-fit", _ctx(s)).choose(
        s, job("x"), s.feasible(job("x")), np.random.default_rng(0)
    )
    assert p == Placement(2, (0,))


def test_best_fit_takes_the_fullest_node_and_tightest_gpu() -> None:
    s = ClusterState([node("a", 4), node("b", 4)])
    s.allocate(job("x", milli=600), Placement(1, (1,)))
    j = job("s", milli=300)
    p = build("best-fit", _ctx(s)).choose(s, j, s.feasible(j), np.random.default_rng(0))
    assert p == Placement(1, (1,))


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_policy_places_on_a_feasible_node_or_none(name: str) -> None:
    s = ClusterState([node("a", 2), node("b", 8)])
    pol = build(name, _ctx(s))
    rng = np.random.default_rng(1)
    for j in [job("e", num=8), job("w"), job("s", milli=250), job("c", num=0)]:
        f = s.feasible(j)
        p = pol.choose(s, j, f, rng)
        assert p is not None
        assert f[p.node]
        s.allocate(j, p)
    assert pol.choose(s, job("big", num=4), s.feasible(job("big", num=4)), rng) is None


def test_fgd_prefers_the_gpu_whose_remainder_nobody_could_use() -> None:
    s = ClusterState([node("a", 2)])
    s.allocate(job("x", milli=500), Placement(0, (0,)))
    j = job("s", milli=500)
    ctx = PolicyContext(s, typical_types([job("t", milli=500)]), np.arange(1))
    p = build("fgd", ctx).choose(s, j, s.feasible(j), np.random.default_rng(0))
    assert p == Placement(0, (0,))  # fills GPU 0 exactly, keeps GPU 1 whole


def test_packing_prefers_a_busy_node() -> None:
    s = ClusterState([node("a", 8), node("b", 8)])
    s.allocate(job("x", num=0, cpu=1000), Placement(1, ()))
    j = job("w")
    p = build("packing", _ctx(s)).choose(s, j, s.feasible(j), np.random.default_rng(0))
    assert p is not None
    assert p.node == 1


def test_block_preserving_keeps_whole_nvlink_pairs() -> None:
    s = ClusterState([node("a", 4, topology="nvlink-pairs-4")])
    s.allocate(job("x"), Placement(0, (0,)))
    # GPU 0 is busy: the rule takes its orphaned partner, GPU 1, so pair 2-3 stays free.
    assert gpus.block_preserving(s, 0, job("y")) == (1,)
    assert gpus.lowest(s, 0, job("y")) == (1,)
    s2 = ClusterState([node("b", 4, topology="nvlink-pairs-4")])
    s2.allocate(job("x"), Placement(0, (2,)))
    assert gpus.block_preserving(s2, 0, job("y")) == (3,)
    assert gpus.lowest(s2, 0, job("y")) == (0,)
