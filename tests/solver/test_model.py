"""The CP-SAT model on hand-made problem data (no snapshot, no policy: solver/ alone).

One 8-GPU node; GPUs 0-1 and 4 free, job A (cost 10) holds 2-3, job B (cost 100) holds 5-7
(3 GPUs: one holding 4 would never be requeued for a 4-GPU share, the swap rule). A target
needs 4 GPUs on the node: block 0-3 (requeue A) or block 4-7 (requeue B). Every
expected figure below is worked out by hand from that picture; the planner's tests
(tests/planner/) check the same model through snapshots and policies.
"""

from __future__ import annotations

import pytest

from slurm_defrag.solver.greedy import greedy
from slurm_defrag.solver.groups import find_groups
from slurm_defrag.solver.model import PlannerModel, Weights
from slurm_defrag.solver.parameters import SolverSettings
from slurm_defrag.solver.problem import (
    JobData,
    LimitData,
    NodeData,
    OptionData,
    OptionKind,
    ProblemData,
    ServedCap,
    TargetData,
)
from slurm_defrag.solver.result import SolveStatus

SETTINGS = SolverSettings(num_workers=1, max_time_in_seconds=10)
LOW, HIGH = 0b0000_1111, 0b1111_0000
NO_LIMITS = LimitData()


def problem(limits: LimitData = NO_LIMITS, *, value: int = 1) -> ProblemData:
    return ProblemData(
        targets=(TargetData("T", value=value, nodes=1, gpus_per_node=4),),
        nodes=(NodeData("n1", gpu_count=8, free_mask=0b0001_0011),),
        jobs=(
            JobData("A", user=0, cost=10, lost=10, gpus=((0, 0b0000_1100),)),
            JobData("B", user=1, cost=100, lost=100, gpus=((0, 0b1110_0000),)),
        ),
        users=("alice", "bob"),
        options=(
            OptionData(0, 0, LOW, OptionKind.REQUEUE, victims=(0,), busy=2),
            OptionData(0, 0, HIGH, OptionKind.REQUEUE, victims=(1,), busy=3),
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


def test_a_lost_gpu_hours_cap_per_user_moves_the_plan_to_the_other_user() -> None:
    # alice's jobs may lose 9 more milli-GPU-hours today, A would lose 10: bob's block.
    result = solve(problem(LimitData(user_lost_caps=(9, None))))
    assert result.requeued == (1,)
    assert solve(problem(LimitData(user_lost_caps=(10, None)))).requeued == (0,)


def served_problem(cap: ServedCap | None, victim_user: str = "alice") -> ProblemData:
    """Two 4-GPU nodes, 3 GPUs of each held by one of ``victim_user``'s jobs (J1, J2; 3, not
    4: the swap rule); three interchangeable 4-GPU targets: carol's T1 (value 3) and T2
    (2), dave's T3 (1). Only two can run: without limits carol's two."""
    whole, held = 0b1111, 0b0111
    return ProblemData(
        targets=(
            TargetData("T1", value=3, nodes=1, gpus_per_node=4, user="carol"),
            TargetData("T2", value=2, nodes=1, gpus_per_node=4, user="carol"),
            TargetData("T3", value=1, nodes=1, gpus_per_node=4, user="dave"),
        ),
        nodes=(NodeData("n1", 4, 0b1000), NodeData("n2", 4, 0b1000)),
        jobs=(
            JobData("J1", user=0, cost=10, lost=10, gpus=((0, held),)),
            JobData("J2", user=0, cost=10, lost=10, gpus=((1, held),)),
        ),
        users=(victim_user,),
        options=tuple(
            OptionData(t, n, whole, OptionKind.REQUEUE, victims=(n,), busy=3)
            for t in range(3)
            for n in range(2)
        ),
        limits=LimitData(served_caps=() if cap is None else (cap,)),
    )


@pytest.mark.parametrize(
    "cap", [ServedCap("carol", requeues=1), ServedCap("carol", lost=10), ServedCap("carol", 1, 15)]
)
def test_a_beneficiary_cap_serves_the_other_users_target(cap: ServedCap) -> None:
    """Issue #40: carol's targets may cost other users one requeue (10 milli-GPU-hours)
    more today: one of hers and dave's run, though hers are worth more. The greedy first
    plan (the hint, and the answer when CP-SAT has no time) counts the same way."""
    assert solve(served_problem(None)).served == (0, 1)
    data = served_problem(cap)
    result = solve(data)
    assert result.status is SolveStatus.OPTIMAL
    assert result.served == (0, 2)
    assert len(result.requeued) == 2
    assert greedy(data, find_groups(data), with_limits=True).served == {0, 2}
    # carol's targets and dave's are no longer one group: the placements a group takes
    # must be one user's, or whose budget they spend is unknown
    assert find_groups(data).group_of[0] != find_groups(data).group_of[2]
    assert len(set(find_groups(served_problem(None)).group_of)) == 1


def test_a_beneficiary_cap_never_counts_the_users_own_jobs() -> None:
    data = served_problem(ServedCap("carol", requeues=0), victim_user="carol")
    assert solve(data).served == (0, 1)
    assert greedy(data, find_groups(data), with_limits=True).served == {0, 1}


def test_the_relaxation_ignores_beneficiary_caps() -> None:
    data = served_problem(ServedCap("carol", requeues=0))
    relaxed = PlannerModel(data, Weights.for_problem(data), with_limits=False).solve(SETTINGS)
    assert relaxed.served == (0, 1)
    assert solve(data).served == (2,)
