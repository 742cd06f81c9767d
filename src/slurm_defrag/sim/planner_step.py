"""The real planner as a :class:`~slurm_defrag.sim.defrag.DefragStep`.

The simulator calls the service's planner, not a copy: each cycle the state is turned
into a snapshot (:mod:`slurm_defrag.sim.snapshot_view`), the planner is asked to start the
pending whole-GPU jobs, and its plan is read back as victims to requeue and target
placements. The planner is imported like any client imports it
(:func:`slurm_defrag.planner.facade.make_plan` with the default policy), so the import
contracts see the simulator's use of it and a change of its signature fails mypy here.
The steps by name, and their typed parameters, are :mod:`slurm_defrag.sim.defrag_steps`.
"""

from __future__ import annotations

from dataclasses import asdict, replace

from slurm_defrag.errors import InputError
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.policy.file import default_policy
from slurm_defrag.sim.defrag import DefragPlan, DefragStep, DefragView, NoDefrag
from slurm_defrag.sim.defrag_steps import NO_LIMITS, StepLimits, step_params
from slurm_defrag.sim.model import Placement
from slurm_defrag.sim.scope import cheapest_nodes, movable_host
from slurm_defrag.sim.snapshot_view import ViewOptions, target_jobs, to_snapshot

PER_USER_OFF: dict[str, object] = {
    "max_preemptions_per_user_per_day": None,
    "max_gpu_hours_lost_per_user_per_day": None,
    "max_requeues_for_user_per_day": None,
    "max_gpu_hours_lost_for_user_per_day": None,
}
"""The per-user limits (issue #40), switched off in the simulator (see ``PlannerStep``)."""


class PlannerStep:
    """Calls the planner each cycle (see module docstring)."""

    name: str = "planner"

    def __init__(
        self,
        max_targets: int = 10,
        min_gpus: int = 1,
        shared_victims: bool = False,
        scope_nodes: int | None = None,
        solver_workers: int | None = None,
        harm: bool = False,
        drains: bool | None = None,
        drain_only: bool = False,
        max_lost_gpu_hours: float | None = None,
        gain: bool = False,
        keep_gpus: int | None = None,
        max_hold_hours: float | None = None,
        queue_head: int | None = None,
    ) -> None:
        policy = default_policy()
        # The simulated jobs have no users (every job is user ""), and each plan is made
        # without a history: a per-user limit would be one more cap on every plan's
        # victims, not a user's day. They are off here; the service counts them
        # (tests/service/test_fairness.py).
        policy = policy.model_copy(update={"limits": policy.limits.model_copy(update=PER_USER_OFF)})
        if max_hold_hours is not None:
            drain = policy.drain.model_copy(update={"max_wait_hours": max_hold_hours})
            policy = policy.model_copy(update={"drain": drain})
        if harm or gain:
            # the wait a victim faces after requeue is part of its cost; with ``gain``
            # a plan must also save its target at least as much wait
            weights = {"requeue_wait_weight": 1.0, "target_wait_weight": 1.0 if gain else 0.0}
            policy = policy.model_copy(update={"cost": policy.cost.model_copy(update=weights)})
        # Drains (held by the engine's reservations) come with the harm count by default.
        # Without them: the simulator's backfill already holds a node for the blocked head
        # job (a drain by another name), and a drain plan starts nothing now.
        if not (harm if drains is None else drains):
            policy = policy.model_copy(
                update={"drain": policy.drain.model_copy(update={"enabled": False})}
            )
        self._policy = policy
        if max_lost_gpu_hours is not None:
            self._policy = self._policy.model_copy(
                update={
                    "limits": self._policy.limits.model_copy(
                        update={"max_gpu_hours_lost_per_plan": max_lost_gpu_hours}
                    )
                }
            )
        if solver_workers is not None:
            # One CP-SAT worker: deterministic (same seed, same run) and, on these small
            # scoped models, faster than a portfolio's start-up.
            self._policy = self._policy.model_copy(
                update={
                    "solver": self._policy.solver.model_copy(update={"num_workers": solver_workers})
                }
            )
        self.max_targets = max_targets
        self.min_gpus = min_gpus
        """Only pending jobs with at least this many GPUs are targets (4: large jobs); running
        jobs that large are never victims (trading one large job for another only churns)."""
        self.keep_gpus = (
            keep_gpus if keep_gpus is not None else (min_gpus if min_gpus > 1 else None)
        )
        """Running jobs of at least this many GPUs are never victims; None: any may be."""
        self.shared_victims = shared_victims
        """GPUs shared by fractional jobs are victims too (all their jobs requeued)."""
        self.drain_only = drain_only
        """No requeue: drain plans only (``planner-drain``)."""
        self.scope_nodes = scope_nodes
        self.queue_head = queue_head
        """Targets only among the first this many pending jobs (:class:`ViewOptions`)."""
        """Show the planner only this many nodes per target, the cheapest-looking ones
        (:mod:`slurm_defrag.sim.scope`); None: the whole cluster."""

    def plan(self, view: DefragView) -> DefragPlan:
        opts = ViewOptions(
            max_targets=self.max_targets,
            queue_head=self.queue_head,
            min_gpus=self.min_gpus,
            keep_gpus=self.keep_gpus,
            shared_victims=self.shared_victims,
            cost_by_share=not view.timed,
        )
        sim = to_snapshot(view, replace(opts, nodes=self._scope(view, opts)))
        snapshot = sim.snapshot
        # The caller chooses the targets, as an operator's --target would: the first pending
        # jobs of at least min_gpus GPUs in queue order, not the strategies' pick.
        targets = [j.id for j in snapshot.jobs if j.request is not None]
        if not targets:
            return DefragPlan()
        cap = 0 if self.drain_only else view.max_requeues
        limits = self._policy.limits.model_copy(update={"max_victims_per_plan": cap})
        policy = self._policy.model_copy(update={"limits": limits})
        plan = make_plan(snapshot, policy, targets=targets)
        index = {spec.name: i for i, spec in enumerate(view.state.nodes)}
        requeue = sim.requeues(v.job_id for v in plan.victims)
        if len(requeue) > view.max_requeues:
            # Bundles count once in the planner's victim limit but requeue all their jobs:
            # a plan over the cap is refused whole, as the service's executor would.
            return DefragPlan()
        place: dict[int, Placement] = {}
        hold: dict[int, Placement] = {}
        for t in plan.targets:
            if t.served and len(t.placements) == 1:
                p = t.placements[0]
                where = Placement(index[p.node], tuple(p.gpus))
                (hold if p.mode == "drain" else place)[int(t.job_id)] = where
        return DefragPlan(requeue=requeue, place=place, hold=hold)

    def _scope(self, view: DefragView, opts: ViewOptions) -> tuple[int, ...] | None:
        if self.scope_nodes is None or view.state.size <= self.scope_nodes:
            return None
        movable = movable_host(view.state, view.running)
        keep: set[int] = set()
        for _, job in target_jobs(view.pending, opts):
            keep.update(cheapest_nodes(view.state, job, self.scope_nodes, movable))
        return tuple(sorted(keep))


def make_step(name: str, limits: StepLimits = NO_LIMITS) -> DefragStep:
    """The registered step ``name`` (:data:`~slurm_defrag.sim.defrag_steps.STEPS`) with
    ``limits``; :class:`InputError` for an unknown name or limits it does not take."""
    try:
        params = step_params(name, limits)
    except ValueError as e:
        raise InputError(str(e)) from None
    if params is None:
        return NoDefrag()
    step = PlannerStep(**asdict(params))
    step.name = name
    return step
