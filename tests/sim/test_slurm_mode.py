"""The simulator's slurm mode: cons_tres order on mutable Weights, --prefer with fallback,
levers applied once per cycle by the product's lever function, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from slurm_defrag.errors import InputError
from slurm_defrag.packing.node_levers import LeverSettings
from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.configuration import configure, plain
from slurm_defrag.sim.levers import SimLevers
from slurm_defrag.sim.model import JobSpec, NodeSpec, Placement
from slurm_defrag.sim.placement.base import PolicyContext
from slurm_defrag.sim.placement.registry import build
from slurm_defrag.sim.protocol_a import run_a

RNG = np.random.default_rng(0)


def _nodes(n: int = 3, gpus: int = 4) -> list[NodeSpec]:
    return [NodeSpec(f"n{i}", 32_000, 100_000, gpus, "v100") for i in range(n)]


def _choose(state: ClusterState, job: JobSpec) -> Placement | None:
    ctx = PolicyContext(state, (), np.arange(state.size, dtype=np.int64))
    return build("slurm", ctx).choose(state, job, state.feasible(job), RNG)


def test_lowest_current_weight_then_node_order() -> None:
    state = ClusterState(_nodes())
    job = JobSpec("j", 1000, 10, 1, 1000)
    where = _choose(state, job)
    assert where == Placement(0, (0,))
    state.set_weight(0, 5)
    state.set_weight(2, 3)
    assert _choose(state, job) == Placement(1, (0,))  # weight 1 < 3 < 5
    state.set_weight(1, 9)
    assert _choose(state, job) == Placement(2, (0,))


def test_prefer_is_tried_first_and_falls_back_to_every_node() -> None:
    state = ClusterState(_nodes())
    state.set_features(2, frozenset({"defrag_fit2"}))
    job = JobSpec("j", 1000, 10, 2, 1000, prefer="defrag_fit2")
    assert _choose(state, job) == Placement(2, (0, 1))
    state.allocate(JobSpec("x", 0, 0, 4, 1000), Placement(2, (0, 1, 2, 3)))
    # the preferred node is full: Slurm falls back to all nodes, in its order
    assert _choose(state, job) == Placement(0, (0, 1))
    # a feature no node has is no constraint at all
    assert _choose(state, JobSpec("k", 1000, 10, 1, 1000, prefer="nowhere")) == Placement(0, (0,))


def test_feature_masks_follow_changes() -> None:
    state = ClusterState(_nodes())
    assert not state.feature_mask("f").any()
    state.set_features(1, frozenset({"f"}))
    assert state.feature_mask("f").tolist() == [False, True, False]
    assert not state.set_features(1, frozenset({"f"}))  # no change, no new version


def test_slurm_without_levers_is_first_fit() -> None:
    nodes = _nodes(6, 8)
    trace = [
        JobSpec(f"j{i}", 2000 * (i % 3 + 1), 100, g, m)
        for i, (g, m) in enumerate(
            [(1, 1000), (2, 1000), (1, 500), (4, 1000), (0, 0), (1, 250)] * 4
        )
    ]
    a = run_a(nodes, trace, "first-fit", 7)
    b = run_a(nodes, trace, "slurm", 7)
    assert a.unallocated_pct == b.unallocated_pct


def test_levers_run_once_per_cycle_not_per_job() -> None:
    state = ClusterState(_nodes(2))
    lev = SimLevers(state, LeverSettings("weight-tiers"))
    lev.apply()
    w0 = state.weight.tolist()
    # a placement between cycles changes nothing until the next cycle
    state.allocate(JobSpec("x", 1000, 10, 1, 1000), Placement(1, (0,)))
    assert state.weight.tolist() == w0
    lev.apply()
    assert state.weight[1] < state.weight[0]  # partly used before idle
    assert lev.cycles == 2


def test_shape_weights_keep_the_one_node_a_big_job_fits_free() -> None:
    # n0 is the only node with 128 CPUs, and first in node order: first fit puts the small
    # job there, and the 8-GPU job asking for 120 CPUs then fits nowhere
    nodes = [
        NodeSpec("n0", 128_000, 800_000, 8, "v100"),
        NodeSpec("n1", 96_000, 400_000, 8, "v100"),
    ]
    small, big = JobSpec("s", 8000, 10, 1, 1000), JobSpec("b", 120_000, 10, 8, 1000)
    for lever, fits in (("none", False), ("shape-weights", True)):
        state = ClusterState(nodes)
        SimLevers(state, LeverSettings(lever)).apply()
        where = _choose(state, small)
        assert where is not None
        state.allocate(small, where)
        assert bool(state.feasible(big).any()) is fits, lever


def test_protocol_a_cycles_every_n_arrivals_and_is_deterministic() -> None:
    nodes = _nodes(6, 8)
    trace = [JobSpec(f"j{i}", 2000, 100, g, 1000) for i, g in enumerate([1, 2, 1, 4, 1] * 4)]
    tiers = configure(placement={"lever": "weight-tiers", "lever_every": 1}).placement
    one = run_a(nodes, trace, tiers, 3)
    again = run_a(nodes, trace, tiers, 3)
    assert one == again.__class__(**{**again.__dict__, "wall_s": one.wall_s})
    assert one.lever_changes > 0


def test_lever_fields() -> None:
    mode = configure(placement={"lever": "fit-tiers", "lever_every": 60}).placement.mode
    assert mode is not None
    assert mode.every == 60
    assert mode.lever.lever == "fit-tiers"
    assert plain("first-fit").mode is None
    with pytest.raises(InputError, match=r"placement.lever: unknown 'nothing'"):
        configure(placement={"lever": "nothing"})
    with pytest.raises(InputError, match=r"placement.lever_every"):
        configure(placement={"lever": "weight-tiers", "lever_every": 0})
    wide = configure(
        placement={"lever": "fgd-tiers", "min_members": 16, "lever_every": 30}
    ).placement.mode
    assert wide is not None
    assert (wide.lever.lever, wide.lever.min_members, wide.every) == ("fgd-tiers", 16, 30)
    with pytest.raises(InputError, match=r"placement.min_members"):
        configure(placement={"lever": "fit-tiers", "min_members": 0, "lever_every": 30})
