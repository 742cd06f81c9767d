"""A defragmentation plan: which pending jobs get which GPUs, what is requeued or drained
for it, the Slurm actions in order, the solver's figures and a plain-English explanation.

Pure data (frozen pydantic models, so ``plan --json`` is the model dump) plus
:func:`apply_plan`, which shows the cluster as it will be once the plan has run: the GPU map
"after" of the dry-run preview.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from slurm_defrag.domain.cluster import ClusterSnapshot, Job, JobState, Node

PLAN_SCHEMA_VERSION = 1


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ActionKind(StrEnum):
    RESERVE = "reserve"
    """``scontrol create reservation``: hold the nodes for the target's user (IGNORE_JOBS)."""
    REQUEUE = "requeue"
    DRAIN = "drain"
    """``scontrol update nodename=... State=DRAIN``: no new jobs land, running ones finish."""
    WAIT_FREE = "wait-free"
    """Wait until the target's GPUs are free (victims gone, or blockers finished)."""
    HAND_OVER = "hand-over"
    """``scontrol update jobid=<target> ReservationName=defrag-<plan id>``."""
    RESUME = "resume"
    RELEASE = "release"
    """Delete the reservation once the target runs."""


class Action(_Frozen):
    step: int
    kind: ActionKind
    target: str | None = None
    """The pending job this action serves."""
    job_id: str | None = None
    """The job acted on (requeue victim, or the target for hand-over)."""
    nodes: tuple[str, ...] = ()
    reservation: str | None = None
    expected_at: datetime | None = None
    """For waits: when the GPUs are expected free (drain: blockers' time limits)."""
    reason: str
    """What Slurm records (``slurm-defrag:<plan id> ...``)."""


PlacementMode = Literal["free", "requeue", "drain"]


class Placement(_Frozen):
    """One node's share of a target."""

    node: str
    gpus: tuple[int, ...]
    mode: PlacementMode
    victims: tuple[str, ...] = ()
    """Jobs requeued for this share (a multi-node victim may be listed under several)."""
    blockers: tuple[str, ...] = ()
    """For drains: the jobs waited for."""
    free_at: datetime | None = None
    """For drains: when the last blocker reaches its time limit."""
    idle_gpu_hours: float = 0.0
    """For drains: GPU-hours the drained node leaves idle while waiting (the drain's cost)."""


class NodeNote(_Frozen):
    """Why a node is or is not used for a target."""

    node: str
    verdict: str
    """``chosen`` | ``possible`` | ``protected`` | ``swap`` (its only ways requeue jobs
    as large as the share there) | a metrics verdict (``topology``, ...)."""
    detail: str
    cost_gpu_hours: float | None = None
    """Cheapest way to host one share here alone (None: impossible)."""


class TargetOutcome(_Frozen):
    job_id: str
    user: str
    partition: str
    request: str
    """Human summary, e.g. ``1x3 nvlink``."""
    value: int
    served: bool
    mode: PlacementMode | None = None
    placements: tuple[Placement, ...] = ()
    cost_gpu_hours: float = 0.0
    """Weighted cost of the victims first requeued for this target, plus drain idle time."""
    expected_start: datetime | None = None
    explanation: str
    node_notes: tuple[NodeNote, ...] = ()


class Victim(_Frozen):
    job_id: str
    name: str
    user: str
    account: str
    partition: str
    qos: str
    gpus: dict[str, tuple[int, ...]]
    gpu_count: int
    since: datetime
    since_source: Literal["start", "checkpoint"]
    lost_gpu_hours: float
    weight: float
    cost_gpu_hours: float
    for_targets: tuple[str, ...]
    reason: str


Optimality = Literal["proven", "within-candidates", "feasible", "none"]


class SolveStats(_Frozen):
    status: str
    """CP-SAT status of the decisive solve: OPTIMAL, FEASIBLE, INFEASIBLE, UNKNOWN, or
    ``NOT_SOLVED`` when there was nothing to decide."""
    optimality: Optimality
    """``proven``: no cheaper plan exists at all; ``within-candidates``: optimal for the
    pruned candidate set, the gap below bounds how far from the true optimum it can be."""
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    """(objective - bound) / objective of the composite objective."""
    served: int = 0
    """Targets this plan serves."""
    served_upper_bound: int | None = None
    """No plan serves more targets than this (proven: from the value bound, see
    docs/planner.md "Bounds")."""
    value: int = 0
    """Target value served (the first objective)."""
    value_upper_bound: int | None = None
    """No plan serves more value than this (CP-SAT's proven bound of the first phase)."""
    cost_gpu_hours: float | None = None
    """Victims' cost plus drain idle time of this plan."""
    cost_lower_bound_gpu_hours: float | None = None
    """No plan serving at least this plan's value costs less than this (proven)."""
    cost_gap: float | None = None
    """(cost - cost lower bound) / cost."""
    work: float = Field(default=0.0, exclude=True)
    """CP-SAT deterministic time used. Not in the JSON: CP-SAT's accounting of it varies
    by a few per cent between identical runs (the plan does not)."""
    deterministic: bool = True
    """False when a CP-SAT call or another stage stopped on the wall clock: another run
    may differ."""
    cut_short: tuple[str, ...] = ()
    """What stopped early, in order: ``candidates`` (the wall cap ran out while they were
    built: some targets have none, others fewer), ``options budget``
    (``solver.max_options``: the lowest-value targets have none), ``solver`` (no time left
    for CP-SAT: the greedy plan), ``greedy`` (that plan stopped on the clock too: the
    targets it had not tried are unserved), ``explanations`` (shortened). Empty: nothing was cut.
    With a cut the bounds are not proven and are left out."""
    runtime_s: float = Field(default=0.0, exclude=True)
    """Wall seconds. Not part of the plan's JSON (the same input gives the same bytes);
    the store keeps it as the plan's ``solve_time_s``."""
    components: int = 0
    options: int = 0
    """Candidate placements given to the solver (after pruning)."""
    full_options: int | None = None
    """Candidate placements before pruning (None: not counted)."""
    pruned: bool = False


class Plan(_Frozen):
    schema_version: int = PLAN_SCHEMA_VERSION
    plan_id: str
    cluster: str
    taken_at: datetime
    status: Literal["ok", "empty", "refused"]
    """``empty``: nothing to do or nothing possible (see ``reason``); ``refused``: a limit
    forbids planning now (e.g. max_concurrent_plans)."""
    reason: str = ""
    targets: tuple[TargetOutcome, ...] = ()
    victims: tuple[Victim, ...] = ()
    actions: tuple[Action, ...] = ()
    total_cost_gpu_hours: float = 0.0
    total_lost_gpu_hours: float = 0.0
    solver: SolveStats
    explanation: str = ""

    @property
    def reservation(self) -> str:
        return f"defrag-{self.plan_id}"

    @property
    def served(self) -> tuple[TargetOutcome, ...]:
        return tuple(t for t in self.targets if t.served)


def apply_plan(snapshot: ClusterSnapshot, plan: Plan) -> ClusterSnapshot:
    """The snapshot as it will be after the plan: victims requeued (pending, no GPUs),
    drain blockers finished, targets running on their GPUs. Pure: returns a new snapshot.
    """
    victims = {v.job_id for v in plan.victims}
    finished = {b for t in plan.targets for p in t.placements for b in p.blockers}
    starts: dict[str, dict[str, frozenset[int]]] = {}
    for t in plan.served:
        starts[t.job_id] = {p.node: frozenset(p.gpus) for p in t.placements}
    tag = f"slurm-defrag:{plan.plan_id}"
    jobs: list[Job] = []
    freed: dict[str, set[int]] = {}
    taken: dict[str, set[int]] = {}
    for job in snapshot.jobs:
        data = job.model_dump()
        if job.id in victims or job.id in finished:
            for node, idx in job.gpus.items():
                freed.setdefault(node, set()).update(idx)
        if job.id in victims:
            data.update(
                state=JobState.PENDING, gpus={}, start_time=None, reason=f"Requeued ({tag})"
            )
        elif job.id in finished:
            data.update(state=JobState.COMPLETED)
        elif job.id in starts:
            gpus = starts[job.id]
            for node, idx in gpus.items():
                taken.setdefault(node, set()).update(idx)
            data.update(
                state=JobState.RUNNING,
                gpus=gpus,
                reason="",
                start_time=max(
                    [snapshot.taken_at]
                    + [
                        p.free_at
                        for t in plan.served
                        if t.job_id == job.id
                        for p in t.placements
                        if p.free_at
                    ]
                ),
            )
        jobs.append(Job.model_validate(data))
    nodes: list[Node] = []
    for n in snapshot.nodes:
        used = (set(n.gpus_used) - freed.get(n.name, set())) | taken.get(n.name, set())
        nodes.append(Node.model_validate({**n.model_dump(), "gpus_used": sorted(used)}))
    return ClusterSnapshot.model_validate(
        {
            **snapshot.model_dump(),
            "nodes": [n.model_dump() for n in nodes],
            "jobs": [j.model_dump() for j in jobs],
        }
    )
