"""Fractional (shard) jobs as the planner's victims, and Protocol A with the real planner."""

from __future__ import annotations

from simkit import job, node

from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.defrag import DefragView, RunningJob
from slurm_defrag.sim.model import JobSpec, NodeSpec, Placement
from slurm_defrag.sim.planner_step import make_step
from slurm_defrag.sim.protocol_a import run_a
from slurm_defrag.sim.scope import cheapest_nodes, movable_host
from slurm_defrag.sim.snapshot_view import HELD_HOURS, ViewOptions, to_snapshot


def _shared_cluster() -> tuple[ClusterState, dict[int, RunningJob]]:
    """Node a: GPU 0 whole job, GPU 1 two shards (300 + 500), GPU 2 one 810 shard, GPU 3
    one 200 shard. Node b: both GPUs whole jobs."""
    s = ClusterState([node("a", 4), node("b", 2)])
    placed = [
        (job("w", num=1), Placement(0, (0,))),
        (job("s1", milli=300), Placement(0, (1,))),
        (job("s2", milli=500), Placement(0, (1,))),
        (job("s3", milli=810), Placement(0, (2,))),
        (job("s4", milli=200), Placement(0, (3,))),
        (job("b0", num=1), Placement(1, (0,))),
        (job("b1", num=1), Placement(1, (1,))),
    ]
    running = {}
    for i, (j, where) in enumerate(placed):
        s.allocate(j, where)
        running[i] = RunningJob(j, where, 0.0)
    return s, running


def test_shards_on_one_gpu_are_one_bundle_priced_by_their_share() -> None:
    state, running = _shared_cluster()
    view = DefragView(0.0, state, running, [(9, job("t", num=1))], 5, timed=False)
    sim = to_snapshot(view, ViewOptions(shared_victims=True, cost_by_share=True))
    assert sim.bundles == {"shared:0:1": (1, 2), "shared:0:2": (3,), "shared:0:3": (4,)}
    assert sim.snapshot.node_by_name["a"].gpus_used == frozenset()
    held = {
        j.id: (view_hours(sim.snapshot.taken_at, j.start_time))
        for j in sim.snapshot.jobs
        if j.start_time is not None
    }
    assert held["0"] == HELD_HOURS
    assert abs(held["shared:0:1"] - 0.8 * HELD_HOURS) < 1e-6
    assert sim.requeues(["shared:0:1", "5"]) == (1, 2, 5)
    # Default: shards stay an unknown, immovable owner.
    plain = to_snapshot(view).snapshot
    assert plain.node_by_name["a"].gpus_used == frozenset({1, 2, 3})


def view_hours(now: object, start: object) -> float:
    return (now - start).total_seconds() / 3600  # type: ignore[operator]


def test_planner_frees_the_least_used_shared_gpus_for_a_whole_gpu_job() -> None:
    # A 2-GPU job: a bundle holds one GPU in the snapshot, and the planner never requeues
    # a job holding as many GPUs of a node as the share it frees them for (the swap rule)
    state, running = _shared_cluster()
    view = DefragView(0.0, state, running, [(9, job("t", num=2))], 5, timed=False)
    plan = make_step("planner").plan(view)
    # the 200-milli shard and the 800 of GPU 1: the least capacity taken away
    assert plan.requeue == (1, 2, 4)
    assert plan.place == {9: Placement(0, (1, 3))}


def test_a_bundle_over_the_requeue_cap_is_refused_whole() -> None:
    s = ClusterState([node("a", 1)])
    running = {}
    for i, milli in enumerate((300, 300)):
        j = job(f"s{i}", milli=milli)
        s.allocate(j, Placement(0, (0,)))
        running[i] = RunningJob(j, Placement(0, (0,)), 0.0)
    view = DefragView(0.0, s, running, [(5, job("t", num=1))], 1, timed=False)
    plan = make_step("planner").plan(view)
    assert plan.requeue == ()
    assert plan.place == {}


def test_scope_keeps_the_cheapest_feasible_nodes() -> None:
    state, running = _shared_cluster()
    big = job("t", num=2)
    assert cheapest_nodes(state, big, 1, movable_host(state, running)) == (0,)
    # Needs more CPUs than node a has even after requeueing its GPU jobs: only b.
    hungry = job("h", num=1, cpu=64_000 - 1000)
    held = movable_host(state, {k: r for k, r in running.items() if r.where.node == 1})
    assert cheapest_nodes(state, hungry, 2, held) == (1,)


def _dense() -> tuple[list[NodeSpec], list[JobSpec]]:
    # The whole-GPU jobs are 2-GPU ones: a GPU's shard bundle holds one GPU in the
    # snapshot, never requeued for a 1-GPU job (the swap rule)
    nodes = [node(f"n{i}", 8) for i in range(6)]
    shapes = [(1, 810), (1, 470), (2, 1000), (1, 230), (2, 1000), (1, 230)]
    trace = [job(f"p{i}", num=n, milli=m, cpu=2000) for i, (n, m) in enumerate(shapes * 10)]
    return nodes, trace


def test_protocol_a_with_the_planner_allocates_more_and_is_deterministic() -> None:
    nodes, trace = _dense()
    base = run_a(nodes, trace, "packing", seed=3)
    a = run_a(nodes, trace, "packing", seed=3, defrag=make_step("planner"))
    b = run_a(nodes, trace, "packing", seed=3, defrag=make_step("planner"))
    assert a.requeues > 0
    assert a.final_unallocated_pct < base.final_unallocated_pct
    strip = lambda r: {k: v for k, v in r.__dict__.items() if k != "wall_s"}  # noqa: E731
    assert strip(a) == strip(b)
    assert a.max_step_requeues <= max(1, int(0.01 * a.running_end) + 1)


def test_protocol_a_total_cap_bounds_all_requeues() -> None:
    nodes, trace = _dense()
    r = run_a(nodes, trace, "packing", seed=3, defrag=make_step("planner"), requeue_cap="total")
    assert r.requeues <= max(0, int(0.01 * (r.running_end + r.victims_dropped)))
    assert r.defrag == "planner (total cap)"
