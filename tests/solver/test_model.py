"""The CP-SAT model on hand-made problem data (no snapshot, no policy: solver/ alone).

One 8-GPU node; GPUs 0-1 free, job A (cost 10) holds 2-3, job B (cost 100) holds 4-7. A
target needs 4 GPUs on the node: block 0-3 (requeue A) or block 4-7 (requeue B). Every
expected figure below is worked out by hand from that picture; the planner's tests
(tests/planner/) check the same model through snapshots and policies.
"""

from __future__ import annotations

import pytest

from slurm_defrag.solver.model import PlannerModel, Weights
from slurm_defrag.solver.problem import (
    JobData,
    LimitData,
    NodeData,
    OptionData,
    OptionKind,
    ProblemData,
    TargetData,
)
from slurm_defrag.solver.result import SolveStatus
from slurm_defrag.solver.settings import SolverSettings

SETTINGS = SolverSettings(num_workers=1, max_time_in_seconds=10)
LOW, HIGH = 0b0000_1111, 0b1111_0000
NO_LIMITS = LimitData()


def problem(limits: LimitData = NO_LIMITS, *, value: int = 1) -> ProblemData:
    return ProblemData(
        targets=(TargetData("T", value=value, nodes=1, gpus_per_node=4),),
        nodes=(NodeData("n1", gpu_count=8, free_mask=0b0000_0011),),
        jobs=(
            JobData("A", user=0, cost=10, lost=10, gpus=((0, 0b0000_1100),)),
            JobData("B", user=1, cost=100, lost=100, gpus=((0, HIGH),)),
        ),
        users=("alice", "bob"),
        options=(
            OptionData(0, 0, LOW, OptionKind.REQUEUE, victims=(0,), busy=2),
            OptionData(0, 0, HIGH, OptionKind.REQUEUE, victims=(1,), busy=4),
        ),
        limits=limits,
    )


def solve(data: ProblemData):  # type: ignore[no-untyped-def]
    return PlannerModel(data, Weights.for_problem(data)).solve(SETTINGS)


def test_the_cheapest_victim_set_frees_the_block() -> None:
    result = solve(problem())
    assert result.status is SolveStatus.OPTIMAL
    assert result.served == (0,)
    assert result.taken == (0,)  # block 0-3
    assert result.requeued == (0,)  # job A only
    assert result.cost == 10
    assert result.cost_bound == 10


def test_a_victim_limit_leaves_the_target_unserved_rather_than_break_it() -> None:
    result = solve(problem(LimitData(max_victims=0)))
    assert result.has_solution
    assert result.served == ()
    assert result.requeued == ()


def test_a_gpu_hour_limit_below_the_cheap_set_serves_nothing() -> None:
    # 10 milli-GPU-hours is what A's requeue loses; 9 allows neither block.
    assert solve(problem(LimitData(max_lost=9))).served == ()
    assert solve(problem(LimitData(max_lost=10))).requeued == (0,)


def test_a_user_cap_moves_the_plan_to_the_other_user() -> None:
    # alice's jobs may not be requeued: the plan takes bob's block, at 100.
    result = solve(problem(LimitData(user_caps=(0, None))))
    assert result.served == (0,)
    assert result.requeued == (1,)
    assert result.cost == 100


def test_the_relaxation_without_limits_is_a_bound() -> None:
    data = problem(LimitData(max_victims=0))
    relaxed = PlannerModel(data, Weights.for_problem(data), with_limits=False).solve(SETTINGS)
    assert relaxed.served == (0,)
    assert relaxed.value_bound == 1


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (OptionData(0, 0, LOW, OptionKind.REQUEUE, victims=(), busy=2), "busy GPUs no victim"),
        (OptionData(0, 0, LOW, OptionKind.REQUEUE, victims=(0,), busy=1), "busy count"),
        (OptionData(0, 0, 0b11, OptionKind.REQUEUE, victims=(), busy=0), "fewer GPUs"),
        (OptionData(0, 0, LOW, OptionKind.DRAIN, victims=(0,), busy=2), "drain requeues"),
        (OptionData(0, 0, LOW, OptionKind.REQUEUE, victims=(5,), busy=2), "out of range"),
    ],
)
def test_inconsistent_problem_data_is_refused_naming_the_option(
    option: OptionData, message: str
) -> None:
    base = problem()
    with pytest.raises(ValueError, match=message) as err:
        ProblemData(base.targets, base.nodes, base.jobs, base.users, (option,))
    assert str(err.value).startswith("option 0:")
