"""Solver settings: the ``[solver]`` table of the policy file (and ``settings.solver``).

Every number is bounded here, at load, so that a value CP-SAT would refuse or choke on
(a seed beyond int32, a hundred million workers, an unknown subsolver, an infinite time
limit) is one error naming the key instead of a traceback in the middle of a cycle.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_SUBSOLVERS: Final = ("max_lp", "default_lp")


class SolverSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    max_time_in_seconds: Annotated[float, Field(gt=0, le=86_400)] = 30.0
    """Wall-clock cap for one whole plan, every stage: candidates, problem data, CP-SAT
    and explanations each stop at their share of it (``planner/deadline.py``) with what
    they have, down to the greedy plan of the candidates built so far. A safety net
    behind ``max_deterministic_time``: a plan it stopped may differ from a rerun
    (``plan.solver.deterministic`` is then false, ``cut_short`` says where)."""
    max_deterministic_time: Annotated[float, Field(gt=0, le=86_400)] = 5.0
    """The planner's budget in CP-SAT deterministic time (work units, about a second of a
    fast core each), split over the parts by size. Stopping on work done rather than on
    the clock is what makes the same input give the same plan on a loaded machine. The
    benchmarks need under 1 unit (10,000 nodes, 500 targets: 0.8); interleaved, a unit
    takes 2-4 s of wall clock on these models."""
    deterministic: bool = True
    """Interleaved CP-SAT search (``interleave_search``): the same plan for the same input
    whatever the worker count or machine load. Off: CP-SAT's free-running portfolio, which
    may return another of several equally good plans each run."""
    num_workers: Annotated[int, Field(ge=1, le=1024)] = 2
    """CP-SAT search workers (threads). Our machines have 2 cores."""
    random_seed: Annotated[int, Field(ge=-(2**31), le=2**31 - 1)] = 0
    """Same snapshot, same policy, same seed: same plan."""
    prune: Literal["auto", "always", "never"] = "auto"
    """Candidate pruning (see docs/planner.md): ``auto`` prunes when the full candidate set
    exceeds ``full_model_max_options``."""
    full_model_max_options: Annotated[int, Field(ge=0, le=10_000_000)] = 4000
    """Up to this many candidate placements the unpruned model is solved directly."""
    exact_fallback_max_options: Annotated[int, Field(ge=0, le=10_000_000)] = 40000
    """When limits bind on a pruned model (where pruning is not proven exact), re-solve
    unpruned if the full candidate set has at most this many placements."""
    max_options: Annotated[int, Field(ge=1, le=100_000_000)] = 1_000_000
    """Most candidate placements one plan builds: its memory bound (docs/benchmarks.md,
    "Memory": about 1 KB of peak RSS per option, besides the snapshot). Members of a
    class of targets each carry the class's placements, so 2,500 targets sharing 2,500
    kept nodes would need 6 million; past the budget each class keeps its cheapest nodes
    only (and if even its own shares' worth does not fit, the targets of lowest value get
    none); the plan says so (``solver.cut_short``) and claims no bound."""
    subsolvers: Annotated[tuple[str, ...], Field(max_length=64)] = DEFAULT_SUBSOLVERS
    """CP-SAT's portfolio (one subsolver per worker, in order). With 2 workers the default
    portfolio has no worker with the full LP relaxation (``max_lp``), which is what proves
    these models optimal: measured 0.7 s versus no proof in 20 s on bench/planner_bench.py.
    Empty: CP-SAT's default. With one worker the LP level is raised instead."""
    fast_presolve: bool = True
    """Skip CP-SAT's probing and symmetry detection in presolve: on these models they cost
    more than they save (bench/planner_bench.py: 1.1 s -> 0.3 s for the first phase)."""
    log_search_progress: bool = False

    @field_validator("subsolvers")
    @classmethod
    def _known_subsolvers(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        if names and names != DEFAULT_SUBSOLVERS:
            problem = _subsolver_problem(names)
            if problem:
                raise ValueError(problem)
        return names


def _subsolver_problem(names: tuple[str, ...]) -> str | None:
    """CP-SAT's own verdict on ``names`` (it knows its subsolvers; we keep no copy of the
    list). Costs the OR-Tools import, so only non-default lists are checked."""
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    model.new_bool_var("x")
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 2
    solver.parameters.subsolvers.extend(names)
    solver.parameters.max_time_in_seconds = 1.0
    if solver.status_name(solver.solve(model)) == "MODEL_INVALID":
        return solver.solution_info() or "CP-SAT rejects these subsolvers"
    return None
