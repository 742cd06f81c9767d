"""The real planner as a :class:`~slurm_defrag.sim.defrag.DefragStep`.

The simulator calls the service's planner, not a copy: each cycle the state is turned
into a snapshot (:mod:`slurm_defrag.sim.snapshot_view`), the planner is asked to start the
pending whole-GPU jobs, and its plan is read back as victims to requeue and target
placements. The planner is looked up at run time (``slurm_defrag.solver.plan``, or the
current ``slurm_defrag.solver.planner.make_plan``) so this module keeps working while
the planner's modules change; without one, ``--defrag planner`` is an input error and
runs use :class:`~slurm_defrag.sim.defrag.NoDefrag`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from slurm_defrag.errors import InputError
from slurm_defrag.sim.defrag import DefragPlan, DefragStep, DefragView, NoDefrag
from slurm_defrag.sim.model import Placement
from slurm_defrag.sim.snapshot_view import to_snapshot

STEPS = ("none", "planner")


def _find_planner() -> Callable[..., Any] | None:
    for module, attr in (
        ("slurm_defrag.solver", "plan"),
        ("slurm_defrag.solver.planner", "make_plan"),
    ):
        try:
            fn = getattr(importlib.import_module(module), attr, None)
        except ImportError:
            continue
        if callable(fn):
            return fn  # type: ignore[no-any-return]
    return None


def planner_available() -> bool:
    return _find_planner() is not None


class PlannerStep:
    """Calls the planner each cycle (see module docstring)."""

    name = "planner"

    def __init__(self, max_targets: int = 10) -> None:
        fn = _find_planner()
        if fn is None:
            raise InputError(
                "--defrag planner: the planner (slurm_defrag.solver) is not available; "
                "use --defrag none"
            )
        self._plan = fn
        self._policy = importlib.import_module("slurm_defrag.policy.file").default_policy()
        self.max_targets = max_targets

    def plan(self, view: DefragView) -> DefragPlan:
        snapshot = to_snapshot(view, self.max_targets)
        if not any(j.request is not None for j in snapshot.jobs):
            return DefragPlan()
        plan = self._plan(snapshot, self._policy)
        index = {spec.name: i for i, spec in enumerate(view.state.nodes)}
        requeue = tuple(int(v.job_id) for v in plan.victims)
        place: dict[int, Placement] = {}
        for t in plan.targets:
            if t.served and len(t.placements) == 1 and t.placements[0].mode != "drain":
                p = t.placements[0]
                place[int(t.job_id)] = Placement(index[p.node], tuple(p.gpus))
        return DefragPlan(requeue=requeue, place=place)


def make_step(name: str) -> DefragStep:
    if name == "none":
        return NoDefrag()
    if name == "planner":
        return PlannerStep()
    raise InputError(f"--defrag {name!r}: choose from {', '.join(STEPS)}")
