"""Every stage under the wall cap (issue #42): past its share of ``max_time_in_seconds`` a
stage stops with what it has, and the plan is still valid and says what was cut.

No timing here: the clock is replaced by one that is over from a chosen moment on (a stage,
or a number of looks at the clock), so each degraded path runs the same every time.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.domain.plan import Plan
from slurm_defrag.planner import deadline
from slurm_defrag.planner.candidates import BUDGET_SPENT, CAP_RAN_OUT
from slurm_defrag.planner.deadline import STAGE_ENDS, Deadline, Stage, unproven
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.policy.file import Policy, parse_policy

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from planner_bench import POLICY, busy_cluster


@pytest.fixture(scope="module")
def instance() -> tuple[ClusterSnapshot, list[str]]:
    return busy_cluster(300, 40, 3)


def _policy(**solver: object) -> Policy:
    return parse_policy({**POLICY, "solver": {**POLICY["solver"], **solver}})


def _valid(plan: Plan) -> None:
    """No GPU given twice, a multi-node target's shares on distinct nodes, every
    victim of a placement in the plan's victims."""
    used: set[tuple[str, int]] = set()
    victims = {v.job_id for v in plan.victims}
    for t in plan.targets:
        if not t.served:
            continue
        nodes = [p.node for p in t.placements]
        assert len(set(nodes)) == len(nodes)
        for p in t.placements:
            assert set(p.victims) <= victims
            for g in p.gpus:
                assert (p.node, g) not in used
                used.add((p.node, g))


def _over_from(monkeypatch: pytest.MonkeyPatch, stages: set[Stage], after: int = 0) -> None:
    """The clock is over for ``stages`` from the ``after``-th look on (0: always)."""
    looks = {"n": 0}

    def over(self: Deadline, stage: Stage) -> bool:
        if stage not in stages:
            return False
        looks["n"] += 1
        return looks["n"] > after

    monkeypatch.setattr(Deadline, "over", over)


def test_nothing_cut_says_so(instance: tuple[ClusterSnapshot, list[str]]) -> None:
    snap, targets = instance
    s = make_plan(snap, _policy(), targets).solver
    assert s.cut_short == ()
    assert s.deterministic
    assert s.optimality == "proven"


def test_no_time_for_candidates_gives_an_empty_plan_that_says_why(
    instance: tuple[ClusterSnapshot, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    snap, targets = instance
    _over_from(monkeypatch, {"candidates"})
    plan = make_plan(snap, _policy(), targets)
    assert plan.solver.cut_short == ("candidates",)
    assert not plan.solver.deterministic
    assert plan.solver.served_upper_bound is None
    assert plan.solver.cost_lower_bound_gpu_hours is None
    assert not plan.served
    assert all(CAP_RAN_OUT in t.explanation for t in plan.targets)
    assert "Cut short: candidates (no bound is proven)." in plan.explanation


@pytest.mark.parametrize("after", [1, 3, 10, 40])
def test_candidates_cut_midway_give_a_valid_partial_plan(
    instance: tuple[ClusterSnapshot, list[str]], monkeypatch: pytest.MonkeyPatch, after: int
) -> None:
    snap, targets = instance
    full = make_plan(snap, _policy(), targets)
    _over_from(monkeypatch, {"candidates"}, after)
    plan = make_plan(snap, _policy(), targets)
    _valid(plan)
    assert plan.solver.cut_short[0] == "candidates"
    assert len(plan.served) <= len(full.served)
    examined = [t for t in plan.targets if CAP_RAN_OUT not in t.explanation]
    assert {t.job_id for t in plan.served} <= {t.job_id for t in examined}


def test_no_time_to_solve_gives_the_greedy_plan(
    instance: tuple[ClusterSnapshot, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    snap, targets = instance
    full = make_plan(snap, _policy(), targets)
    _over_from(monkeypatch, {"problem"})
    plan = make_plan(snap, _policy(), targets)
    _valid(plan)
    assert plan.solver.cut_short == ("solver",)
    assert plan.solver.optimality == "feasible"
    # the greedy serves as many here, at a cost no lower than the optimum
    assert len(plan.served) == len(full.served)
    assert plan.total_cost_gpu_hours >= full.total_cost_gpu_hours - 1e-9


def test_no_time_to_explain_keeps_the_plan_and_shortens_the_words(
    instance: tuple[ClusterSnapshot, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    snap, targets = instance
    full = make_plan(snap, _policy(), targets)
    _over_from(monkeypatch, {"explain"})
    plan = make_plan(snap, _policy(), targets)
    assert plan.solver.cut_short == ("explanations",)
    assert [t.placements for t in plan.targets] == [t.placements for t in full.targets]
    assert all(t.node_notes == () for t in plan.targets)
    assert any("explanation cut short" in t.explanation for t in plan.targets if not t.served)


def test_an_options_budget_cuts_each_class_to_its_cheapest_nodes(
    instance: tuple[ClusterSnapshot, list[str]],
) -> None:
    """Every target keeps candidates (its class's cheapest nodes), fewer of them."""
    snap, targets = instance
    full = make_plan(snap, _policy(), targets)
    plan = make_plan(snap, _policy(max_options=full.solver.options // 3), targets)
    _valid(plan)
    assert plan.solver.cut_short == ("options budget",)
    assert plan.solver.deterministic  # the input decides this cut, not the clock
    assert plan.solver.cost_lower_bound_gpu_hours is None
    assert plan.solver.options <= full.solver.options // 3
    assert not any(BUDGET_SPENT in t.explanation for t in plan.targets)
    assert len(plan.served) >= len(full.served) // 2


def test_a_budget_too_small_for_every_class_goes_to_the_highest_values(
    instance: tuple[ClusterSnapshot, list[str]],
) -> None:
    snap, targets = instance
    plan = make_plan(snap, _policy(max_options=40), targets)
    _valid(plan)
    assert plan.solver.cut_short == ("options budget",)
    assert plan.solver.options <= 40
    left_out = [t for t in plan.targets if BUDGET_SPENT in t.explanation]
    kept = [t for t in plan.targets if BUDGET_SPENT not in t.explanation]
    assert left_out
    assert kept
    assert max(t.value for t in left_out) < max(t.value for t in kept)


def test_a_plan_cut_short_claims_no_bound() -> None:
    from slurm_defrag.domain.plan import SolveStats

    s = SolveStats(
        status="OPTIMAL", optimality="proven", served=3, served_upper_bound=3,
        cost_gpu_hours=2.0, cost_lower_bound_gpu_hours=2.0, cost_gap=0.0,
    )  # fmt: skip
    assert unproven(s, []) is s
    cut = unproven(s, ["solver"])
    assert (cut.optimality, cut.deterministic, cut.cut_short) == ("feasible", False, ("solver",))
    assert cut.served_upper_bound is None
    assert cut.cost_lower_bound_gpu_hours is None


def test_the_stages_end_in_order_within_the_cap() -> None:
    ends = [STAGE_ENDS[s] for s in ("candidates", "problem", "solve", "explain")]
    assert ends == sorted(ends)
    assert ends[0] > 0
    assert ends[-1] < 1
    clock = Deadline(100.0, 60.0)
    assert clock.end("solve") == pytest.approx(100.0 + 60.0 * STAGE_ENDS["solve"])
    clock.note("solver")
    clock.note("solver")
    assert clock.cut == ["solver"]
    assert not Deadline.unlimited().over("candidates")
    assert deadline.CHECK_EVERY > 0
