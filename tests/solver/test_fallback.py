"""The plan without CP-SAT (solver/fallback.py): the greedy plan as a result, and the
greedy stopping on a deadline with the plan as it stands (issue #42)."""

from __future__ import annotations

from test_model import problem

from slurm_defrag.solver.fallback import greedy_result
from slurm_defrag.solver.greedy import greedy
from slurm_defrag.solver.groups import find_groups
from slurm_defrag.solver.result import SolveStatus


def test_the_greedy_plan_as_a_result_claims_no_bound() -> None:
    data = problem()
    res = greedy_result(data, with_limits=True)
    assert res.status is SolveStatus.FEASIBLE
    assert (res.served, res.taken, res.requeued) == ((0,), (0,), (0,))  # the cheap set
    assert res.cost == 10
    assert res.cost_bound == 0
    assert res.value_bound == sum(t.value for t in data.targets)
    assert res.wall_capped


def test_a_deadline_already_past_leaves_every_target_untried() -> None:
    data = problem()
    plan = greedy(data, find_groups(data), True, deadline=0.0)
    assert plan.stopped
    assert (plan.served, plan.taken, plan.requeued) == (set(), [], set())
    res = greedy_result(data, with_limits=True, deadline=0.0)
    assert (res.served, res.taken, res.cost) == ((), (), 0)


def test_no_deadline_never_stops() -> None:
    data = problem()
    assert not greedy(data, find_groups(data), True).stopped
