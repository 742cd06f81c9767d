"""Per-job routing (the fgd-route lever): job_submit.lua, run through lupa, names the node
the simulator's packing would choose, and remembers what it named."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_defrag.errors import InputError
from slurm_defrag.packing.fit_classes import Mix, NodeFree, TaskClass, rise
from slurm_defrag.packing.node_levers import LeverSettings, route_feature
from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.configuration import configure
from slurm_defrag.sim.levers import SimLevers, SlurmMode
from slurm_defrag.sim.model import JobSpec, NodeSpec, Placement
from slurm_defrag.sim.submit_hook import SubmitHook, node_table

MIX = Mix(
    (
        TaskClass(4, 1, 1000, 0.4),
        TaskClass(8, 2, 1000, 0.2),
        TaskClass(2, 1, 500, 0.2),
        TaskClass(16, 0, 0, 0.2),
    )
)
SETTINGS = LeverSettings("fgd-route", mix=MIX)


def _job(gpus: int, milli: int = 1000, cpus: int = 4) -> JobSpec:
    return JobSpec("j", cpus * 1000, 1000, gpus, milli)


def _routed(nodes: list[NodeSpec], busy: int | None = None) -> tuple[ClusterState, SubmitHook]:
    """A cycle's table for these nodes (node ``busy`` running a 1-GPU job) loaded into
    job_submit.lua."""
    state = ClusterState(nodes)
    if busy is not None:
        state.allocate(_job(1), Placement(busy, (0,)))
    levers = SimLevers(state, SETTINGS)
    hook = SubmitHook(node_table(state, SETTINGS))
    levers.apply()
    assert levers.route is not None
    hook.route(levers.route)
    return state, hook


def test_names_the_fuller_node_and_keeps_count_until_the_next_table() -> None:
    state, hook = _routed(
        [NodeSpec("a", 64_000, 100_000, 4, "v100"), NodeSpec("b", 64_000, 100_000, 4, "v100")],
        busy=1,
    )
    assert state.features[1] == frozenset({route_feature("b")})
    assert hook.prefer(_job(1)) == route_feature("b")  # in use, a stays whole
    # b has 2 free GPUs left in the script's copy: a 2-GPU job still fits there ...
    assert hook.prefer(_job(2)) == route_feature("b")
    # ... and then b is full in the copy, with no new table: the next job opens a
    assert hook.prefer(_job(1)) == route_feature("a")


def test_no_node_fits_no_hint() -> None:
    _, hook = _routed([NodeSpec("a", 8_000, 100_000, 2, "t4")])
    assert hook.prefer(_job(4)) is None  # no node has 4 GPUs
    assert hook.prefer(_job(1, cpus=16)) is None  # nor 16 CPUs
    assert hook.prefer(JobSpec("cpu", 2000, 1000)) == route_feature("a")  # CPUs only


def test_gpu_type_and_memory_count() -> None:
    _, hook = _routed(
        [NodeSpec("small", 64_000, 1_000, 4, "t4"), NodeSpec("big", 64_000, 100_000, 4, "a100")]
    )
    assert hook.prefer(JobSpec("m", 4000, 50_000, 1, 1000)) == route_feature("big")
    assert hook.prefer(JobSpec("t", 4000, 500, 1, 1000, frozenset({"t4"}))) == route_feature(
        "small"
    )


def test_a_broken_route_table_is_refused_by_name() -> None:
    state = ClusterState([NodeSpec("a", 8_000, 1_000, 2, "t4")])
    hook = SubmitHook(node_table(state, SETTINGS))
    with pytest.raises(InputError, match="route: node 1"):
        hook.route(
            {
                "step": 40.0,
                "mix": [{"cpus": 1, "gpus": 1, "milli": 1000, "weight": 1.0}],
                "nodes": [{"feature": "x"}],
            }
        )


def _lua_rise(hook: SubmitHook, node: NodeFree, req: TaskClass) -> Any:
    lua = hook._lua  # the test compares the script's measure with Python's
    entry: dict[str, Any] = {
        "step": 40.0,
        "mix": [
            {"cpus": t.cpus, "gpus": t.gpus, "milli": t.milli, "weight": t.weight}
            for t in MIX.types
        ],
        "nodes": [{"feature": "f", "free": list(node[0]), "cpus": node[1], "model": node[2]}],
    }
    d = lua.globals().slurm_defrag
    r = d.prepare_route(lua.table_from(entry, recursive=True))
    rq = lua.table_from(
        {"gpus": req.gpus, "milli": req.milli, "cpus": req.cpus, "mem": 0, "key": "k"}
    )
    return d.route_rise(r.nodes[1], rq, r)


HOOK = SubmitHook(node_table(ClusterState([NodeSpec("a", 8_000, 1_000, 2, "t4")]), SETTINGS))


@settings(max_examples=200, deadline=None)
@given(
    free=st.lists(st.sampled_from([0, 250, 500, 750, 1000]), min_size=1, max_size=8),
    cpus=st.integers(0, 32),
    req=st.sampled_from(
        [
            TaskClass(4, 1, 1000, 1),
            TaskClass(2, 2, 1000, 1),
            TaskClass(1, 1, 250, 1),
            TaskClass(8, 0, 0, 1),
            TaskClass(3, 4, 1000, 1),
        ]
    ),
)
def test_the_scripts_fgd_rise_is_the_planners(free: list[int], cpus: int, req: TaskClass) -> None:
    node: NodeFree = (tuple(free), cpus, "t4")
    want = rise(node, req, MIX)
    got = _lua_rise(HOOK, node, req)
    if want is None:
        assert got is None
    else:
        assert got == pytest.approx(want, abs=1e-6)


def test_an_error_inside_the_script_stops_the_simulation() -> None:
    """slurmctld's hook fails open (no hint); a simulator that did the same would publish
    a figure for a lever that never ran."""
    _, hook = _routed([NodeSpec("a", 8_000, 100_000, 2, "t4")])
    hook._lua.execute("slurm_defrag.route_pick = function() error('boom') end")
    with pytest.raises(RuntimeError, match="boom"):
        hook.prefer(_job(1))


def _mode(lever: str, mix: str) -> SlurmMode | None:
    return configure(placement={"lever": lever, "lever_every": 30, "mix": mix}).placement.mode


def test_seen_mix_policies_weigh_by_the_jobs_seen_so_far() -> None:
    mode = _mode("fgd-route-score", "seen")
    assert mode is not None
    assert (mode.lever.lever, mode.every, mode.seen_mix) == ("fgd-route-score", 30, True)
    with pytest.raises(InputError, match=r"placement.mix: 'seen' needs an fgd"):
        _mode("fit-features", "seen")
    state = ClusterState(
        [NodeSpec("a", 64_000, 100_000, 4, "v100"), NodeSpec("b", 64_000, 100_000, 4, "v100")]
    )
    levers = SimLevers(state, SETTINGS, seen_mix=True)
    assert levers.apply() == 0  # no job seen: no mix, no route, nothing set
    assert levers.route is None
    levers.observe("1", _job(2, cpus=3))
    levers.observe("1", _job(1))  # the same job again counts once
    levers.apply()
    assert levers.route is not None
    assert levers.route["mix"] == [{"cpus": 3, "gpus": 2, "milli": 1000, "weight": 1.0}]


def test_warm_policies_start_with_a_full_estimate() -> None:
    mode = _mode("fgd-route-score", "warm")
    assert mode is not None
    assert (mode.seen_mix, mode.warm, mode.every) == (True, True, 30)
    state = ClusterState([NodeSpec("a", 64_000, 100_000, 4, "v100")])
    levers = SimLevers(state, SETTINGS, seen_mix=True)
    levers.warm_up([_job(1), _job(2)], np.random.default_rng(1))
    assert levers.seen is not None
    assert len(levers.seen) == levers.seen.keep
    levers.apply()
    assert levers.route is not None  # a route from the first cycle on
