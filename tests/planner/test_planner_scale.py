"""Planner at scale (issue #16): greedy first plan, interchangeable targets, warm start,
bounds reported each against its own."""

from __future__ import annotations

import sys
from pathlib import Path

from builders import course_small_victims
from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.domain.plan import Placement, Plan
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.policy.file import parse_policy

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from planner_bench import POLICY, busy_cluster


def _valid(snap: ClusterSnapshot, plan: Plan) -> None:
    """No GPU given twice; a multi-node target's shares on distinct nodes."""
    used: set[tuple[str, int]] = set()
    for t in plan.served:
        nodes = [p.node for p in t.placements]
        assert len(set(nodes)) == len(nodes), t.job_id
        for p in t.placements:
            for g in p.gpus:
                assert (p.node, g) not in used
                used.add((p.node, g))


def test_a_plan_exists_when_cp_sat_has_no_time() -> None:
    """Defect: the 10,000-node / 500-target bench served 0 of 500 when CP-SAT's share of
    the budget ran out before a first solution. The greedy plan is the fallback. (No work
    budget, not a tiny wall cap: that cap now stops the candidates first, see
    test_planner_deadline.py.)"""
    snap, targets = busy_cluster(300, 40, 3)
    policy = parse_policy({**POLICY, "solver": {"max_deterministic_time": 1e-6}})
    plan = make_plan(snap, policy, targets)
    assert len(plan.served) > 0
    assert plan.solver.served_upper_bound is not None
    assert plan.solver.served <= plan.solver.served_upper_bound
    _valid(snap, plan)


def test_interchangeable_targets_share_variables_and_stay_valid() -> None:
    """Many targets of a few classes (two-node ones among them) on a pruned instance."""
    snap, targets = busy_cluster(400, 80, 5)
    plan = make_plan(snap, parse_policy(POLICY), targets)
    s = plan.solver
    assert s.pruned
    assert s.optimality == "proven"
    assert s.served == s.served_upper_bound
    assert s.cost_lower_bound_gpu_hours is not None
    assert s.cost_gpu_hours is not None
    assert abs(s.cost_gpu_hours - s.cost_lower_bound_gpu_hours) < 1e-9
    assert any(len(t.placements) == 2 for t in plan.served)
    _valid(snap, plan)


def test_bounds_are_reported_each_against_its_own(course_snapshot: ClusterSnapshot) -> None:
    plan = make_plan(course_snapshot, parse_policy({"version": 1}))
    s = plan.solver
    assert (s.served, s.served_upper_bound) == (1, 1)
    assert s.value == s.value_upper_bound
    assert s.cost_gpu_hours == plan.total_cost_gpu_hours
    assert s.cost_lower_bound_gpu_hours == s.cost_gpu_hours
    assert s.cost_gap == 0.0


def test_warm_start_keeps_the_previous_placement_on_a_tie() -> None:
    """104 protected: 101 (node01) and 106 (node03) tie; the previous plan's choice wins
    (the course with victims smaller than the share: ``builders.course_small_victims``)."""
    course_snapshot = course_small_victims()
    policy = parse_policy({"version": 1, "protections": {"users": ["erin"]}})
    plan = make_plan(course_snapshot, policy)
    (target,) = plan.targets
    other = (
        ("node03", (0, 1, 7)) if target.placements[0].node == "node01" else ("node01", (0, 6, 7))
    )
    previous = plan.model_copy(
        update={
            "targets": (
                target.model_copy(
                    update={
                        "placements": (Placement(node=other[0], gpus=other[1], mode="requeue"),)
                    }
                ),
            )
        }
    )
    again = make_plan(course_snapshot, policy, previous=previous)
    assert again.targets[0].placements[0].node == other[0]
    assert again.total_cost_gpu_hours == plan.total_cost_gpu_hours
