"""Event-driven Slurm-like scheduler: priority + FIFO, EASY backfill, departures, defrag.

Events are job arrivals, job ends, backfill cycles (every ``bf_interval`` s while jobs
wait) and defrag cycles (every ``defrag_interval`` s). Scheduling mimics slurmctld:

* the main pass walks pending jobs by (priority desc, submit time, id) and starts each one
  the placement policy can place; it stops at the first job that cannot start, which then
  blocks lower-priority jobs (one partition);
* the backfill pass reserves a node and a start time for that blocked job
  (:mod:`slurm_defrag.sim.backfill`) and starts later jobs, up to ``bf_max_job_test`` of
  them, that fit now and either end before the reservation or avoid the reserved node
  (EASY, ``bf_reserve="head"``); with ``bf_reserve="all"`` it plans every job it tests
  and cannot start, blocking whole nodes as slurmctld's backfill does (see there);
* a defrag step may requeue running jobs (at most ``requeue_share`` of them per cycle); a
  requeued job loses its progress since its last checkpoint (all of it without
  checkpoints: GPU-hours lost), waits again with its old priority and, when it starts
  again, runs only what its checkpoint did not save;
* with a priority model (:mod:`slurm_defrag.sim.priority`, priority/multifactor) a job's
  priority is the model's: set at submit, recomputed for every pending job every
  ``period`` s (slurmctld's decay thread); without one a job keeps the priority it came
  with (0, or job_submit.lua's boost);
* a defrag step may also *hold* a GPU block for a pending job (a reservation, the
  service's drain plan): GPUs of the block are taken by the reservation as they free, so
  no other job starts on them; when all are free the job starts there. A hold is
  released when its job starts elsewhere, or after ``hold_max`` s unused.

A job no node could ever hold (more CPUs, memory or GPUs than any node has, a GPU model
or NVLink block no node has) is refused at submit, as slurmctld refuses it ("Requested
node configuration is not available"): it is never queued, its record says so, and
:attr:`EngineStats.refused` counts it. Queued, it would wait for ever and the run never end.

Ties in event time are processed ends first, then arrivals, then cycles, then in
insertion order, so runs are reproducible.
"""

from __future__ import annotations

import heapq
from bisect import insort
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from slurm_defrag.domain.units import MILLI
from slurm_defrag.sim.backfill import (
    EndQueue,
    NodePicker,
    Plans,
    end_queue,
    first_in_order,
    plan,
    reserve,
)
from slurm_defrag.sim.cluster_state import BoolArray, ClusterState
from slurm_defrag.sim.defrag import DefragStep, DefragView, NoDefrag, RunningJob, requeue_limit
from slurm_defrag.sim.model import JobSpec, Placement
from slurm_defrag.sim.placement.base import PlacementPolicy
from slurm_defrag.sim.priority import PriorityModel
from slurm_defrag.sim.timed_workload import gpu_hours

_END, _ARRIVAL, _BACKFILL, _DEFRAG, _LEVER, _PRIORITY, _MAIN = 0, 1, 2, 3, 4, 5, 6
_RESERVED = JobSpec(name="reservation", cpu_milli=0, memory_mib=0, num_gpu=1, gpu_milli=MILLI)
"""What a reservation allocates on each GPU of its block once free (no CPU, no memory)."""


@dataclass
class Hold:
    """A GPU block reserved for a pending job (``scontrol create reservation``)."""

    where: Placement
    since: float
    taken: set[int] = field(default_factory=set)
    """GPUs of the block the reservation already holds (free ones are taken at once)."""


@dataclass(frozen=True)
class EngineConfig:
    bf_interval: float = 30.0
    """Seconds between backfill passes (Slurm's ``bf_interval`` default)."""
    bf_max_job_test: int = 100
    """Pending jobs a backfill pass looks at (Slurm's default is 500; fewer is faster)."""
    bf_reserve: Literal["head", "all"] = "head"
    """Plan only the blocked head job (EASY) or, like slurmctld, every job tested that
    cannot start now, each plan blocking its whole node (:mod:`slurm_defrag.sim.backfill`)."""
    bf_resolution: float = 0.0
    """Round ``bf_reserve="all"`` plans down to this many seconds (Slurm's
    ``bf_resolution``, default 60); 0 keeps exact times."""
    defrag_interval: float = 60.0
    """Seconds between defrag cycles when a defrag step is set."""
    requeue_share: float = 0.01
    """Requeue at most this share of running jobs per defrag cycle."""
    time_limit: float = float("inf")
    """Stop the simulation at this time even if jobs remain."""
    lever_interval: float = 60.0
    """Seconds between packing-lever cycles (the service's cycle) when a lever is set."""
    sched_min_interval: float = 0.0
    """At most one main pass per this many seconds (slurmctld's ``sched_min_interval``,
    2 s by default): a submit or an end that comes sooner waits for the next pass. 0: a
    main pass at every submit and end, at once (the simulator before issue #41 item 5)."""
    hold_max: float = 2 * 3600.0
    """A reservation (hold) not used within this many seconds is released (the planner's
    drain ``max_wait_hours``: its blockers' time limits all end within it)."""


@dataclass
class JobRecord:
    first_start: float | None = None
    end: float | None = None
    requeues: int = 0
    lost_gpu_h: float = 0.0
    placement: Placement | None = None
    """Where the job last started (the cross-check against real Slurm compares it)."""
    refused: bool = False
    """Refused at submit: no node could ever hold it (module docstring)."""


@dataclass
class EngineStats:
    records: list[JobRecord]
    alloc_integral: float = 0.0
    """Allocated milli-GPU x seconds within the measurement window."""
    requeues: int = 0
    lost_gpu_h: float = 0.0
    served_gpu_h: float = 0.0
    end_time: float = 0.0
    window: tuple[float, float] = (0.0, 0.0)
    backfilled: int = 0
    extra: dict[str, float] = field(default_factory=dict)
    refused: int = 0
    """Jobs refused at submit (no node could ever hold them)."""


class Engine:
    def __init__(
        self,
        state: ClusterState,
        jobs: Sequence[JobSpec],
        policy: PlacementPolicy,
        rng: np.random.Generator,
        defrag: DefragStep | None = None,
        config: EngineConfig | None = None,
        window: tuple[float, float] = (0.0, float("inf")),
        plan_node: NodePicker | None = None,
        levers: Callable[[float], object] | None = None,
        submit: Callable[[JobSpec], JobSpec] | None = None,
        priority: PriorityModel | None = None,
    ) -> None:
        """``plan_node`` chooses the node of a ``bf_reserve="all"`` plan among those where
        the job will fit (default: the first in Slurm's node order). ``levers`` is one
        service cycle of packing levers (:class:`slurm_defrag.sim.levers.SimLevers`),
        called at 0 and every ``lever_interval`` s while work remains. ``submit`` is what
        job_submit.lua does to a job when it arrives (once: a requeued job keeps it), for
        hooks whose answer depends on the moment (per-job routing). ``priority``: the
        priority model (None: every job keeps the priority it came with)."""
        self.state = state
        self._plan_node = plan_node or first_in_order(state)
        self.jobs = list(jobs)
        self.policy = policy
        self.rng = rng
        self.step = defrag or NoDefrag()
        self.levers = levers
        self.submit = submit
        self.priority = priority
        self.cfg = config or EngineConfig()
        self.pending: list[tuple[int, float, int]] = []  # (-priority, submit, id), sorted
        self.running: dict[int, RunningJob] = {}
        self.on_node: dict[int, set[int]] = {}
        self.token: dict[int, int] = {}
        self.events: list[tuple[float, int, int, int, int]] = []
        self._seq = 0
        self.now = 0.0
        self._released = True  # resources freed since the head was last found blocked
        self._bf_dirty = True
        self._bf_scheduled = False
        self.stats = EngineStats(records=[JobRecord() for _ in self.jobs], window=window)
        self._last_t = 0.0
        self.done: dict[int, float] = {}
        """Run time a job's checkpoints saved before it was requeued."""
        self.holds: dict[int, Hold] = {}
        self._held_milli = 0
        self._ends: EndQueue | None = None
        self._ends_at = -1
        """Running jobs by expected end and what is free, for backfill planning, as of
        ``state.changes`` = ``_ends_at`` (every start, end or hold changes the state)."""
        self.holds_made = 0
        self._main_at = -float("inf")
        """When the last main pass ran (``sched_min_interval``)."""
        self._main_due = False
        self.planned: dict[int, float] = {}
        """Pending job -> the start backfill last planned for it (slurmctld's StartTime of
        a pending job); kept until the next backfill pass, as slurmctld keeps it."""

    # -- event plumbing -----------------------------------------------------------------

    def _push(self, t: float, kind: int, jid: int = -1, token: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self.events, (t, kind, self._seq, jid, token))

    def _advance(self, t: float) -> None:
        lo, hi = self.stats.window
        a, b = max(self._last_t, lo), min(t, hi)
        if b > a:
            # GPUs a reservation holds idle are not allocated to work
            used = self.state.allocated_gpu_milli() - self._held_milli
            self.stats.alloc_integral += used * (b - a)
        self._last_t = t
        self.now = t

    def run(self) -> EngineStats:
        for i, j in enumerate(self.jobs):
            self._push(j.submit, _ARRIVAL, i)
        if not isinstance(self.step, NoDefrag):
            self._push(self.cfg.defrag_interval, _DEFRAG)
        if self.levers is not None:
            self._push(0.0, _LEVER)
        if self.priority is not None:
            self._push(self.priority.period, _PRIORITY)
        while self.events:
            t, kind, _, jid, token = heapq.heappop(self.events)
            if t > self.cfg.time_limit:
                break
            self._advance(t)
            if kind == _END:
                if self.token.get(jid) == token and jid in self.running:
                    self._finish(jid)
                    self._main_pass()
            elif kind == _MAIN:
                self._main_due = False
                self._main_pass()
            elif kind == _ARRIVAL:
                self._arrive(jid)
            elif kind == _BACKFILL:
                self._bf_scheduled = False
                self._backfill()
            elif kind == _DEFRAG:
                self._defrag()
                if self.pending or any(e[1] == _ARRIVAL for e in self.events):
                    self._push(t + self.cfg.defrag_interval, _DEFRAG)
            elif kind == _LEVER and self.levers is not None:
                self.levers(t)
                if self._work_left():
                    self._push(t + self.cfg.lever_interval, _LEVER)
            elif kind == _PRIORITY and self.priority is not None:
                self._reprioritise()
                if self._work_left():
                    self._push(t + self.priority.period, _PRIORITY)
            if self.pending and not self._bf_scheduled:
                self._bf_scheduled = True
                self._push(t + self.cfg.bf_interval, _BACKFILL)
        self.stats.end_time = self.now
        return self.stats

    def _work_left(self) -> bool:
        return bool(self.pending or self.running) or any(e[1] == _ARRIVAL for e in self.events)

    # -- job life -----------------------------------------------------------------------

    def _arrive(self, jid: int) -> None:
        """A job is submitted: job_submit.lua, then its priority, then the queue."""
        if self.submit is not None:
            self.jobs[jid] = self.submit(self.jobs[jid])
        if not self.state.could_hold(self.jobs[jid]):
            self.stats.records[jid].refused = True
            self.stats.refused += 1
            return
        if self.priority is not None:
            self._set_priority(jid, self.priority.submitted(jid, self.jobs[jid], self.now))
        self._enqueue(jid)
        if self.pending[0][2] == jid:
            self._released = True
        self._main_pass()

    def _enqueue(self, jid: int) -> None:
        j = self.jobs[jid]
        insort(self.pending, (-j.priority, j.submit, jid))
        self._bf_dirty = True

    def _start(self, jid: int, where: Placement) -> None:
        job = self.jobs[jid]
        if jid in self.holds:
            self._unhold(jid)
        self.state.allocate(job, where)
        done = self.done.get(jid, 0.0)
        self.running[jid] = RunningJob(job, where, self.now, done)
        self.on_node.setdefault(where.node, set()).add(jid)
        self.token[jid] = self.token.get(jid, 0) + 1
        rec = self.stats.records[jid]
        if rec.first_start is None:
            rec.first_start = self.now
        rec.placement = where
        if self.priority is not None:
            self.priority.started(jid, job, self.now)
        self._push(self.now + job.duration - done, _END, jid, self.token[jid])

    def _stop(self, jid: int) -> RunningJob:
        r = self.running.pop(jid)
        self.state.release(r.job, r.where)
        self.on_node[r.where.node].discard(jid)
        self._released = self._bf_dirty = True
        if self.holds:
            self._take_held(r.where.node)
        return r

    def _finish(self, jid: int) -> None:
        r = self._stop(jid)
        if self.priority is not None:
            self.priority.stopped(jid, r.job, self.now, requeued=False)
        self.stats.records[jid].end = self.now
        self.stats.served_gpu_h += gpu_hours(r.job, r.job.duration)

    def _requeue(self, jid: int) -> None:
        r = self._stop(jid)
        if self.priority is not None:
            self.priority.stopped(jid, r.job, self.now, requeued=True)
        ckpt = r.last_checkpoint(self.now)
        saved = 0.0 if ckpt is None else ckpt - r.start
        self.done[jid] = r.done + saved
        lost = gpu_hours(r.job, self.now - r.start - saved)
        rec = self.stats.records[jid]
        rec.requeues += 1
        rec.lost_gpu_h += lost
        self.stats.requeues += 1
        self.stats.lost_gpu_h += lost
        self._enqueue(jid)

    # -- priority -----------------------------------------------------------------------

    def _set_priority(self, jid: int, priority: int) -> bool:
        """Give job ``jid`` (not queued) a new priority; True if it changed."""
        job = self.jobs[jid]
        if job.priority == priority:
            return False
        self.jobs[jid] = replace(job, priority=priority)
        return True

    def _reprioritise(self) -> None:
        """The model's recalculation (slurmctld's decay thread): every pending job gets its
        new priority and the queue its new order; the next main pass walks it."""
        assert self.priority is not None
        pending = [(jid, self.jobs[jid]) for _, _, jid in self.pending]
        new = self.priority.recalc(self.now, pending)
        changed = [jid for jid, p in new.items() if self._set_priority(jid, p)]
        if changed:
            self.pending = sorted((-self.jobs[j].priority, s, j) for _, s, j in self.pending)
            self._released = self._bf_dirty = True
            self._schedule()

    # -- scheduling ---------------------------------------------------------------------

    def _try(self, jid: int, exclude: int | BoolArray | None = None) -> bool:
        """Start ``jid`` now if the policy places it, never on the ``exclude`` node(s)."""
        job = self.jobs[jid]
        feasible = self.state.feasible(job)
        if exclude is not None:
            feasible[exclude] = False
        where = self.policy.choose(self.state, job, feasible, self.rng)
        if where is None:
            return False
        self.pending.remove((-job.priority, job.submit, jid))
        self._start(jid, where)
        return True

    def _main_pass(self) -> None:
        """The main pass a submit or an end triggers: now, or at the first moment
        ``sched_min_interval`` allows (one pass then serves every event before it)."""
        gap = self.cfg.sched_min_interval
        if gap <= 0:
            self._schedule()
            return
        if self.now - self._main_at >= gap:
            self._main_at = self.now
            self._schedule()
        elif not self._main_due:
            self._main_due = True
            self._push(self._main_at + gap, _MAIN)

    def _schedule(self) -> None:
        """Main pass: start jobs in priority order until one cannot start."""
        if not self._released:
            return
        while self.pending:
            if not self._try(self.pending[0][2]):
                self._released = False
                return

    def _backfill(self) -> None:
        if not self.pending or not self._bf_dirty:
            return
        self._bf_dirty = False
        self._released = True
        self._schedule()
        self.planned = {}
        if self.cfg.bf_reserve == "all":
            self._backfill_planning_all()
            return
        if len(self.pending) < 2:
            return
        head_id = self.pending[0][2]
        head = self.jobs[head_id]
        res = reserve(self.state, head, self.on_node, self.running, self.now)
        if res is not None:
            self.planned[head_id] = res.start
        failed: set[tuple[object, bool]] = set()
        tested = 0
        for _, _, jid in list(self.pending[1:]):
            if tested >= self.cfg.bf_max_job_test:
                break
            job = self.jobs[jid]
            late = res is not None and self.now + job.estimate > res.start
            key = (job.shape, late)
            if key in failed:
                continue
            tested += 1
            if self._try(jid, exclude=res.node if (res is not None and late) else None):
                self.stats.backfilled += 1
            else:
                failed.add(key)

    def _backfill_planning_all(self) -> None:
        """Slurm's backfill: walk the pending jobs in priority order; start each one that
        fits now on a node no earlier plan blocks for its time limit, else plan it."""
        plans = Plans(self.cfg.bf_resolution)
        for _, _, jid in list(self.pending[: self.cfg.bf_max_job_test]):
            job = self.jobs[jid]
            blocked = plans.blocked(self.state.size, self.now, job.estimate)
            if self._try(jid, exclude=blocked):
                self.stats.backfilled += 1
                continue
            if self._ends is None or self._ends_at != self.state.changes:
                self._ends = end_queue(self.state, self.running)
                self._ends_at = self.state.changes
            res = plan(self.state, job, self.running, self.now, plans, self._plan_node, self._ends)
            if res is not None:
                plans.add(res.node, res.start, job.estimate, self.now)
                self.planned[jid] = res.start

    def _defrag(self) -> None:
        if not self.running or not self.pending:
            return
        view = DefragView(
            now=self.now,
            state=self.state,
            running=dict(self.running),
            pending=[(jid, self.jobs[jid]) for _, _, jid in self.pending],
            max_requeues=requeue_limit(len(self.running), self.cfg.requeue_share),
            held=frozenset(self.holds),
            planned={j: t for j, t in self.planned.items() if j not in self.running},
        )
        for jid in [j for j, h in self.holds.items() if self.now - h.since > self.cfg.hold_max]:
            self._unhold(jid)
        plan = self.step.plan(view)
        for jid in [v for v in plan.requeue if v in self.running][: view.max_requeues]:
            self._requeue(jid)
        for jid, where in plan.place.items():
            job = self.jobs[jid]
            key = (-job.priority, job.submit, jid)
            # A placement that no longer fits (CPU, memory, GPUs taken) is left to the
            # scheduler: the plan was made on a snapshot without CPU and memory.
            if jid not in self.running and key in self.pending and self.state.can_place(job, where):
                self.pending.remove(key)
                self._start(jid, where)
        for jid, where in plan.hold.items():
            if jid not in self.running and jid not in self.holds:
                self._hold(jid, where)
        self._released = True
        self._schedule()

    # -- reservations -------------------------------------------------------------------

    def _hold(self, jid: int, where: Placement) -> None:
        for other in self.holds.values():
            if other.where.node == where.node and set(other.where.gpus) & set(where.gpus):
                return  # two reservations never overlap (Slurm refuses it too)
        self.holds[jid] = Hold(where, self.now)
        self.holds_made += 1
        self._take_held(where.node)

    def _unhold(self, jid: int) -> None:
        h = self.holds.pop(jid)
        for g in sorted(h.taken):
            self.state.release(_RESERVED, Placement(h.where.node, (g,)))
            self._held_milli -= MILLI
        self._released = self._bf_dirty = True

    def _take_held(self, node: int) -> None:
        """Reservations on ``node`` take their GPUs that are free; one that holds its
        whole block hands it to its job (left to the scheduler if CPUs or memory lack)."""
        for jid, h in list(self.holds.items()):
            if h.where.node != node:
                continue
            for g in h.where.gpus:
                if g not in h.taken and self.state.gpu_left[node, g] == MILLI:
                    self.state.allocate(_RESERVED, Placement(node, (g,)))
                    h.taken.add(g)
                    self._held_milli += MILLI
            if len(h.taken) < len(h.where.gpus):
                continue
            self._unhold(jid)
            job = self.jobs[jid]
            key = (-job.priority, job.submit, jid)
            if key in self.pending and self.state.can_place(job, h.where):
                self.pending.remove(key)
                self._start(jid, h.where)
