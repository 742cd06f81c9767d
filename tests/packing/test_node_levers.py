"""The product's packing levers: weights and fit-class features from one snapshot."""

from __future__ import annotations

import pytest

from slurm_defrag.domain.cluster import ClusterSnapshot, Job, JobState, Node
from slurm_defrag.packing.fit_classes import Mix, TaskClass
from slurm_defrag.packing.node_levers import (
    IDLE_TIER,
    MAX_WEIGHT,
    TIER_SPAN,
    LeverSettings,
    compute_levers,
    is_ours,
    pack_table,
    route_feature,
)
from slurm_defrag.synth import EPOCH


def _node(name: str, used: frozenset[int] = frozenset(), share: int = 0, **kw: object) -> Node:
    milli = tuple((share if share and g in used else 1000 if g in used else 0) for g in range(4))
    fields: dict[str, object] = {
        "name": name,
        "partitions": ("batch",),
        "state": frozenset({"MIXED" if used else "IDLE"}),
        "gpu_model": "v100",
        "gpu_count": 4,
        "gpus_used": used,
        "gpu_milli_used": milli,
        "cpus": 32,
        "cpus_alloc": 4 if used else 0,
    }
    return Node.model_validate({**fields, **kw})


def _snap() -> ClusterSnapshot:
    # a: idle; b: 1 GPU busy; c: 3 GPUs busy; d: 1 GPU half used by shards
    return ClusterSnapshot(
        taken_at=EPOCH,
        nodes=(
            _node("a", weight=2),
            _node("b", frozenset({0})),
            _node("c", frozenset({0, 1, 2})),
            _node("d", frozenset({0}), share=500),
        ),
    )


def test_none_changes_nothing() -> None:
    out = compute_levers(_snap(), LeverSettings("none"))
    assert out.weights == {}
    assert out.features == {}


def test_weight_tiers_fullest_first_idle_last_admin_order_kept() -> None:
    w = compute_levers(_snap(), LeverSettings("weight-tiers")).weights
    assert w["c"] < w["b"] < w["d"] < TIER_SPAN + IDLE_TIER < w["a"]  # by free capacity
    assert w["a"] == 2 * TIER_SPAN + IDLE_TIER  # the admin's weight 2 still dominates


def test_idle_bump_is_the_old_lever() -> None:
    w = compute_levers(_snap(), LeverSettings("idle-bump", bump=1000)).weights
    assert w == {"a": 1002, "b": 1, "c": 1, "d": 1}


def test_size_weights_fill_smaller_nodes_first_admin_order_kept() -> None:
    snap = _snap().model_copy(
        update={"nodes": (*_snap().nodes, _node("e", gpu_count=2, gpu_milli_used=(0, 0)))}
    )
    w = compute_levers(snap, LeverSettings("size-weights")).weights
    assert w["e"] == TIER_SPAN + 2 < w["b"] == w["c"] == TIER_SPAN + 4  # busy or not
    assert w["a"] == 2 * TIER_SPAN + 4  # the admin's weight 2 still dominates
    fit = compute_levers(snap, LeverSettings("fit-size"))
    assert fit.weights == w
    assert "defrag_fit1" in fit.features["c"]


def test_shape_weights_keep_the_biggest_nodes_of_a_size_for_last() -> None:
    # big: the only node that holds a job asking for 64 CPUs; e: fewer GPUs, most memory
    snap = ClusterSnapshot(
        taken_at=EPOCH,
        nodes=(
            _node("big", cpus=64, memory_mb=768_000),
            _node("mem", memory_mb=768_000),
            _node("std", memory_mb=384_000),
            _node("e", gpu_count=2, gpu_milli_used=(0, 0), cpus=128, memory_mb=2_000_000),
            _node("admin", weight=2, memory_mb=384_000),
        ),
    )
    w = compute_levers(snap, LeverSettings("shape-weights")).weights
    assert w["e"] < w["std"] < w["mem"] < w["big"] < TIER_SPAN * 2  # GPUs, CPUs, memory
    assert w["admin"] == 2 * TIER_SPAN + w["std"] - TIER_SPAN  # admin's order first
    # one rank per distinct shape: 4 shapes, so a few weights, not one per MiB
    assert sorted(v - TIER_SPAN for k, v in w.items() if k != "admin") == [1, 2, 3, 4]


def test_fit_features_tag_the_tightest_nodes_per_class() -> None:
    f = compute_levers(_snap(), LeverSettings("fit-features")).features
    assert "defrag_fit1" in f["c"]
    assert "defrag_fit1" not in f["a"]
    assert "defrag_fit4" in f["a"]  # only the idle node fits 4
    assert "defrag_fitshard" in f["d"]  # the half-used GPU
    assert compute_levers(_snap(), LeverSettings("fit-features")).weights == {}


def test_fgd_features_need_a_mix_and_tag_least_rise() -> None:
    with pytest.raises(ValueError, match="mix"):
        LeverSettings("fgd-tiers")
    mix = Mix((TaskClass(2, 1, 500, 0.5), TaskClass(4, 2, 1000, 0.5)))
    s = LeverSettings("fgd-tiers", mix=mix)
    assert s.shard_sizes == (500,)
    out = compute_levers(_snap(), s)
    # a 500-share job fills d's half-used GPU: no rise there, a rise anywhere else
    assert out.features["d"] >= {"defrag_fitshard500"}
    assert "defrag_fitshard500" not in out.features["a"]
    table = pack_table(s)
    assert table is not None
    assert table["shard_sizes"] == [500]


def test_cpu_only_jobs_prefer_the_nodes_with_fewest_free_gpus() -> None:
    """CPU-only work on a node with free GPUs strands them (the largest single cause of
    the gap to FGD in Protocol A): its class is the nodes with the fewest whole free GPUs."""
    f = compute_levers(_snap(), LeverSettings("fit-features")).features
    assert [n for n in "abcd" if "defrag_fitcpu" in f[n]] == ["c"]  # 1 free GPU, the fewest
    mix = Mix((TaskClass(2, 1, 1000, 0.5), TaskClass(30, 0, 0, 0.5)))
    s = LeverSettings("fgd-features", mix=mix)
    assert s.classes["defrag_fitcpu"] == TaskClass(30, 0, 0, 1.0)
    out = compute_levers(_snap(), s).features
    # 30 CPUs fit only where 30 are free: the idle node a (32 free), stranding its GPUs
    assert [n for n in "abcd" if "defrag_fitcpu" in out[n]] == ["a"]
    table = pack_table(s)
    assert table is not None
    assert table["cpu_feature"] == "defrag_fitcpu"


def test_unavailable_nodes_get_no_features() -> None:
    snap = ClusterSnapshot(
        taken_at=EPOCH,
        nodes=(_node("a", state=frozenset({"DRAIN"})), _node("b")),
        jobs=(
            Job(
                id="1",
                partition="batch",
                state=JobState.RUNNING,
                start_time=EPOCH,
                gpus={"b": frozenset({0})},
            ),
        ),
    )
    f = compute_levers(snap, LeverSettings("fit-features")).features
    assert f["a"] == frozenset()
    assert "defrag_fit1" in f["b"]


def test_min_members_widens_each_class_to_the_best_n_nodes() -> None:
    """One tightest node fills with a cycle's first arrival; at least N keep room."""
    one = compute_levers(_snap(), LeverSettings("fit-features")).features
    two = compute_levers(_snap(), LeverSettings("fit-features", min_members=2)).features
    assert [n for n in "abcd" if "defrag_fit1" in one[n]] == ["c"]
    assert [n for n in "abcd" if "defrag_fit1" in two[n]] == ["b", "c", "d"]  # tie kept


def test_cpu_buckets_split_each_gpu_class_by_free_cpus() -> None:
    s = LeverSettings("fit-features", cpu_buckets=(4, 30))
    f = compute_levers(_snap(), s).features
    # 28 CPUs free on b, c, d; 32 on the idle a: only a has room for the 30-CPU bucket
    assert [n for n in "abcd" if "defrag_fit1c4" in f[n]] == ["c"]
    assert [n for n in "abcd" if "defrag_fit1c30" in f[n]] == ["a"]
    assert "defrag_fit1" not in set().union(*f.values())  # no class without a bucket
    table = pack_table(s)
    assert table is not None
    assert table["cpu_buckets"] == [4, 30]


def test_weights_stay_within_slurms_32_bits_and_keep_the_admins_order() -> None:
    # An admin Weight of 2,000,000 x TIER_SPAN would pass 2^32: scontrol refuses it.
    heavy = ClusterSnapshot(
        taken_at=EPOCH,
        nodes=(
            _node("light", weight=7),
            _node("mid", weight=2_000_000),
            _node("top", weight=MAX_WEIGHT),
            _node("small", weight=2_000_000, gpu_count=2, gpu_milli_used=(0, 0)),
        ),
    )
    for lever in ("size-weights", "shape-weights", "weight-tiers", "idle-bump"):
        w = compute_levers(heavy, LeverSettings(lever)).weights
        assert all(1 <= v <= MAX_WEIGHT for v in w.values()), lever
        assert w["light"] < w["mid"] <= w["top"], lever
    size = compute_levers(heavy, LeverSettings("size-weights")).weights
    assert size["small"] < size["mid"]  # ranks: fewer GPUs first within one admin weight
    assert size["light"] == TIER_SPAN + 4  # rank 1


def test_small_admin_weights_are_used_as_they_are() -> None:
    edge = (MAX_WEIGHT - (TIER_SPAN - 1)) // TIER_SPAN
    snap = ClusterSnapshot(taken_at=EPOCH, nodes=(_node("a", weight=edge), _node("b", weight=3)))
    w = compute_levers(snap, LeverSettings("size-weights")).weights
    assert w == {"a": edge * TIER_SPAN + 4, "b": 3 * TIER_SPAN + 4}
    assert w["a"] <= MAX_WEIGHT


ROUTE_MIX = Mix((TaskClass(2, 1, 500, 0.5), TaskClass(4, 2, 1000, 0.5)))


def test_route_gives_every_node_its_own_feature_and_the_table() -> None:
    out = compute_levers(_snap(), LeverSettings("fgd-route", mix=ROUTE_MIX))
    assert out.weights == {}
    assert {n: set(f) for n, f in out.features.items()} == {n: {f"defrag_at_{n}"} for n in "abcd"}
    table = out.route
    assert table is not None
    nodes = table["nodes"]
    assert isinstance(nodes, list)
    # cons_tres order: a has Weight 2, the others 1
    assert [n["feature"] for n in nodes] == [f"defrag_at_{n}" for n in "bcda"]
    d = nodes[2]
    assert d["free"] == [500, 1000, 1000, 1000]
    assert (d["cpus"], d["idle"]) == (28, False)
    assert nodes[3]["idle"] is True
    assert table["mix"] == [
        {"cpus": 2, "gpus": 1, "milli": 500, "weight": 0.5},
        {"cpus": 4, "gpus": 2, "milli": 1000, "weight": 0.5},
    ]
    assert table["score"] is False
    assert compute_levers(_snap(), LeverSettings("fgd-tiers", mix=ROUTE_MIX)).route is None
    scored = compute_levers(_snap(), LeverSettings("fgd-route-score", mix=ROUTE_MIX)).route
    assert scored is not None
    assert scored["score"] is True
    # FGD breaks ties by a node order of its own: a fixed hash of the name, per node
    nodes = scored["nodes"]
    assert isinstance(nodes, list)
    assert len({n["rank"] for n in nodes}) == 4


def test_route_shape_orders_by_shape_weights_and_breaks_ties_in_that_order() -> None:
    snap = ClusterSnapshot(
        taken_at=EPOCH,
        nodes=(_node("big", cpus=96), _node("small"), _node("mid", cpus=64, weight=1)),
    )
    out = compute_levers(snap, LeverSettings("fgd-route-shape", mix=ROUTE_MIX))
    # shape-weights: (GPUs, CPUs, memory) rank within the admin's Weight (1 for all)
    assert out.weights == {"small": TIER_SPAN + 1, "mid": TIER_SPAN + 2, "big": TIER_SPAN + 3}
    table = out.route
    assert table is not None
    assert table["score"] is True
    # ordered by the Weights set this cycle (the snapshot's are all 1), ranks in that order
    assert [(n["feature"], n["rank"]) for n in table["nodes"]] == [  # type: ignore[index]
        ("defrag_at_small", 0),
        ("defrag_at_mid", 1),
        ("defrag_at_big", 2),
    ]


def test_route_features_are_ours_and_never_ambiguous() -> None:
    assert route_feature("gpu-01.rack2") == "defrag_at_gpu_01_rack2"
    assert is_ours("defrag_at_gpu_01")
    assert not is_ours("nvlink")
    snap = ClusterSnapshot(taken_at=EPOCH, nodes=(_node("g-1"), _node("g_1"), _node("g2")))
    out = compute_levers(snap, LeverSettings("fgd-route", mix=ROUTE_MIX))
    # g-1 and g_1 would share a feature: neither is routed, so a hint names one node only
    assert out.features == {"g2": frozenset({"defrag_at_g2"})}
    assert out.route is not None
    assert [n["feature"] for n in out.route["nodes"]] == ["defrag_at_g2"]  # type: ignore[index]
