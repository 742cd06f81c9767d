"""The plan without CP-SAT: the greedy plan, when the wall cap leaves no time to solve.

Building the model costs time in proportion to the options (2.7 s for 946,000 on 20,000
nodes); past the problem stage's share of the cap (``planner/deadline.py``) the planner
takes the greedy plan of :mod:`.greedy` as it is. It is a valid plan (the greedy respects
every constraint and, asked to, every limit), with no proven bound.
"""

from __future__ import annotations

import time

from slurm_defrag.solver.greedy import greedy
from slurm_defrag.solver.groups import deal, find_groups
from slurm_defrag.solver.problem import ProblemData
from slurm_defrag.solver.result import SolveResult, SolveStatus


def greedy_result(
    data: ProblemData,
    with_limits: bool,
    prefer: frozenset[int] = frozenset(),
    deadline: float | None = None,
) -> SolveResult:
    """The greedy plan of ``data`` as a :class:`SolveResult`: FEASIBLE, no bounds (cost
    bound 0, value bound the sum of all values), ``wall_capped``. Past ``deadline`` (a
    ``time.perf_counter()`` value) the targets not placed yet stay unserved: the greedy
    tries a target against every option of its class, 550 targets x 1,800 options was
    26 s on 50,000 nodes."""
    t0 = time.perf_counter()
    groups = find_groups(data)
    plan = greedy(data, groups, with_limits, prefer, deadline)
    served = tuple(sorted(plan.served))
    taken = tuple(deal(data, groups, set(served), sorted(plan.taken)))
    requeued = tuple(sorted(plan.requeued))
    cost = sum(data.jobs[j].cost for j in requeued)
    cost += sum(data.options[o].drain_cost for o in taken)
    return SolveResult(
        status=SolveStatus.FEASIBLE,
        runtime_s=time.perf_counter() - t0,
        taken=taken,
        requeued=requeued,
        served=served,
        value_bound=sum(t.value for t in data.targets),
        cost=cost,
        cost_bound=0,
        wall_capped=True,
    )
