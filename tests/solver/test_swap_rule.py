"""The swap rule in the model and in the greedy plan, on hand-made problem data.

A job is never requeued for shares on a node that take no more GPUs there than it holds:
that frees nothing for the cluster, it only moves who waits (found live: one user's 8-GPU
jobs requeued for each other, cycle after cycle). ``ProblemData.swap_need`` says what an
option whose victim is as large as its own share needs beside it; the model asks for it,
the greedy plan takes such an option only once the node already hosts enough.
"""

from __future__ import annotations

from slurm_defrag.solver.fallback import greedy_result
from slurm_defrag.solver.greedy import greedy
from slurm_defrag.solver.groups import find_groups
from slurm_defrag.solver.model import PlannerModel, Weights
from slurm_defrag.solver.parameters import SolverSettings
from slurm_defrag.solver.problem import (
    JobData,
    NodeData,
    OptionData,
    OptionKind,
    ProblemData,
    TargetData,
)
from slurm_defrag.solver.result import SolveStatus

SETTINGS = SolverSettings(num_workers=1, max_time_in_seconds=10)
LOW, HIGH = 0b0000_1111, 0b1111_0000


def _problem(held: int, free: int, targets: int, options: list[OptionData]) -> ProblemData:
    """One 8-GPU node; job J (cost 10) holds ``held``; ``targets`` 4-GPU targets, values
    ``targets, ..., 1`` (of distinct users: never one group)."""
    return ProblemData(
        targets=tuple(
            TargetData(f"T{t}", value=targets - t, nodes=1, gpus_per_node=4, user=f"u{t}")
            for t in range(targets)
        ),
        nodes=(NodeData("n1", gpu_count=8, free_mask=free),),
        jobs=(JobData("J", user=0, cost=10, lost=10, gpus=((0, held),)),),
        users=("zoe",),
        options=tuple(options),
    )


def _requeue(t: int, mask: int, held: int) -> OptionData:
    return OptionData(t, 0, mask, OptionKind.REQUEUE, victims=(0,), busy=(mask & held).bit_count())


def _free(t: int, mask: int) -> OptionData:
    return OptionData(t, 0, mask, OptionKind.REQUEUE)


def _solve(data: ProblemData):  # type: ignore[no-untyped-def]
    return PlannerModel(data, Weights.for_problem(data)).solve(SETTINGS)


def test_the_need_is_one_more_than_the_largest_victim_when_it_is_as_large() -> None:
    six = 0b0011_1111
    data = _problem(six, 0b1100_0000, 1, [_requeue(0, LOW, six), _requeue(0, HIGH, six)])
    assert data.swap_need == (7, 7)  # 6 GPUs of J against 4 of the share: 7 wanted
    two = 0b0000_0011
    assert _problem(two, ~two & 0xFF, 1, [_requeue(0, LOW, two)]).swap_need == (0,)


def test_a_share_alone_never_requeues_a_job_as_large() -> None:
    """J holds 0-3; a 4-GPU target's only option is J's GPUs: no plan, from CP-SAT or
    from the greedy (the hint, and the plan when CP-SAT has no time)."""
    data = _problem(LOW, HIGH, 1, [_requeue(0, LOW, LOW)])
    result = _solve(data)
    assert result.status is SolveStatus.OPTIMAL
    assert result.served == ()
    assert result.requeued == ()
    assert greedy(data, find_groups(data), with_limits=True).served == set()
    assert greedy_result(data, True).requeued == ()


def test_co_hosted_shares_may_requeue_a_job_smaller_than_them_together() -> None:
    """J holds 0-5 (6 GPUs), 6-7 free: two 4-GPU shares take 8 > 6 together. CP-SAT
    serves both; the greedy, one share at a time, never takes the first alone."""
    six = 0b0011_1111
    opts = [_requeue(t, m, six) for t in range(2) for m in (LOW, HIGH)]
    data = _problem(six, 0b1100_0000, 2, opts)
    result = _solve(data)
    assert result.served == (0, 1)
    assert result.requeued == (0,)
    assert greedy(data, find_groups(data), with_limits=True).served == set()
    # one target alone: J is never requeued for it
    alone = _problem(six, 0b1100_0000, 1, opts[:2])
    assert _solve(alone).served == ()


def test_the_greedy_takes_it_once_the_node_hosts_enough() -> None:
    """J holds 0-3, 4-7 free. T0 (higher value) takes the free block first; T1 may then
    requeue J (4 + 4 > 4 GPUs on the node). Without T0 nothing is requeued."""
    data = _problem(LOW, HIGH, 2, [_free(0, HIGH), _requeue(1, LOW, LOW)])
    plan = greedy(data, find_groups(data), with_limits=True)
    assert plan.served == {0, 1}
    assert plan.requeued == {0}
    assert _solve(data).served == (0, 1)
    only = _problem(LOW, HIGH, 1, [_requeue(0, LOW, LOW)])
    assert greedy(only, find_groups(only), with_limits=True).requeued == set()


def test_a_job_holding_the_whole_node_is_never_requeued_there() -> None:
    """8 GPUs of an 8-GPU node: no set of shares there takes more (the live churn)."""
    whole = 0xFF
    data = _problem(whole, 0, 2, [_requeue(t, m, whole) for t in range(2) for m in (LOW, HIGH)])
    assert set(data.swap_need) == {9}
    assert _solve(data).served == ()
