"""The planner's plan equals a brute-force optimum on 500 tiny random instances.

Even seeds solve the unpruned model, odd seeds force pruning, so both paths are checked
against the same independent brute force (tests/planner/planner_brute.py).
"""

from __future__ import annotations

import pytest
from planner_brute import brute_force, plan_value_cost
from planner_instances import random_instance

from slurm_defrag.planner.facade import make_plan

N_INSTANCES = 500
CHUNK = 50


@pytest.mark.parametrize("start", range(0, N_INSTANCES, CHUNK))
def test_plan_cost_equals_brute_force(start: int) -> None:
    mismatches = []
    for seed in range(start, start + CHUNK):
        inst = random_instance(seed, "always" if seed % 2 else "never")
        plan = make_plan(inst.snapshot, inst.policy, inst.targets, inst.history)
        best = brute_force(inst.snapshot, inst.policy, inst.targets, inst.history)
        got = plan_value_cost(plan)
        if (got.value, got.cost) != (best.value, best.cost):
            mismatches.append((seed, got, best, plan.solver.optimality))
        assert plan.solver.optimality in ("proven", "within-candidates"), seed
    assert not mismatches
