"""A Slurm controller in simulated time, advanced from outside: the cluster of
``slurm-defrag demo``.

:class:`~slurm_defrag.sim.engine.Engine` replays a whole trace in one call and calls the
planner itself. Here the service is the client: the cluster advances in steps
(:meth:`LiveCluster.advance`) and, between them, takes what the service does to Slurm
through typed methods (the simulator backend of the Slurm port, :mod:`slurm_defrag.demo`,
maps ``scontrol`` words onto them). It reuses the simulator's model of nodes and of
Slurm's selection: free GPUs in a :class:`~slurm_defrag.sim.cluster_state.ClusterState`, nodes
taken in cons_tres order (ascending Weight, then node order: :func:`~slurm_defrag.sim.
policies.slurm_select.first_in_order`), GPUs lowest index first and an NVLink job on
the lowest free block (:func:`~slurm_defrag.sim.gpus.lowest`).

What it models of slurmctld, and how far:

* one partition; jobs of one node and whole GPUs; CPUs and memory are not tracked (the
  snapshot leaves them out);
* scheduling, at every event (submit, end, eligibility, reservation start or end) and
  after a write: pending jobs in priority order (then submit time, then id), each started
  on the first node where it fits now. The first one that cannot start gets a planned
  start and node, the earliest its GPUs free by the running jobs' *time limits* (EASY
  backfill); later jobs may use that node only if their own time limit ends before then.
  The planned start is the pending job's ``StartTime`` in the snapshot;
* a job runs for its ``duration`` (hidden from the snapshot; minus what its checkpoints
  saved before a requeue), at most its time limit (then TIMEOUT); finished jobs stay
  visible for :data:`MIN_JOB_AGE_S`;
* requeue: the job's GPUs are free at once, it is PENDING with reason ``BeginTime`` for
  :data:`REQUEUE_DELAY_S`, then waits again with its priority; it loses the run since its
  last checkpoint (``JobSpec.ckpt_interval``; the snapshot carries the checkpoint in the
  job's comment, ``defrag:ckpt=<epoch s>``, as a job script would write it);
* reservations (IGNORE_JOBS, whole nodes): while active, their nodes take only jobs that
  name the reservation and whose user or account it lists; a job that names one runs
  only on its nodes. Deleting one that a running job is in is refused (slurmctld 22.05:
  "Reservation request busy"); pending jobs that named it are detached; one that ends
  (its end time) is removed the same way;
* hold (JobHeldAdmin) and release, a pending job's priority and begin time;
* drain (no new job on the node, running ones go on) and resume; node Weight and
  features.

Refusals raise :class:`Refused` with slurmctld's wording. Everything is deterministic:
events at the same time are taken ends first, then submissions, then the rest.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from slurm_defrag.domain.cluster import (
    GPU_MEMORY_GB,
    ClusterSnapshot,
    GpuRequest,
    Job,
    JobState,
    Node,
    NodeFlag,
    Partition,
    Reservation,
)
from slurm_defrag.domain.topology import GpuTopology, mask_of, popcount
from slurm_defrag.policy.comment_keys import CHECKPOINT_KEY
from slurm_defrag.sim import gpus
from slurm_defrag.sim.cluster_state import BoolArray, ClusterState
from slurm_defrag.sim.model import JobSpec, NodeSpec, Placement
from slurm_defrag.sim.placement.slurm_select import first_in_order
from slurm_defrag.sim.timed_workload import gpu_hours

REQUEUE_DELAY_S = 120.0
"""A requeued job may start again this long after the requeue (slurmctld keeps it back for
its credential's lifetime, ``cred_expire``, 120 s by default): reason ``BeginTime``."""
MIN_JOB_AGE_S = 300.0
"""Finished jobs stay in the snapshot this long (Slurm's ``MinJobAge`` default)."""
HELD = "JobHeldAdmin"


class Refused(Exception):
    """slurmctld refused a request; the message is its wording."""


@dataclass
class LiveJob:
    """One job and what happened to it. ``spec`` is what was submitted; the mutable fields
    are slurmctld's view (priority, reservation, hold, comment) and the run."""

    id: str
    spec: JobSpec
    qos: str = "normal"
    requeue: bool = True
    priority: int = 0
    state: JobState = JobState.PENDING
    reason: str = "None"
    begin: float = 0.0
    """Eligible to start from (submit, a requeue's delay, ``StartTime=``)."""
    held: bool = False
    reservation: str = ""
    comment: str = ""
    admin_comment: str = ""
    start: float | None = None
    where: Placement | None = None
    done: float = 0.0
    """Run time its checkpoints saved before it was requeued (it resumes from there)."""
    end: float | None = None
    planned_start: float | None = None
    token: int = 0
    first_start: float | None = None
    started_in: str = ""
    """The reservation it last started in ("" for none)."""
    requeues: int = 0
    lost_gpu_h: float = 0.0

    @property
    def limit_s(self) -> float:
        return self.spec.estimate

    def last_checkpoint(self, now: float) -> float | None:
        """When it last checkpointed in this run (None: not since it started)."""
        every = self.spec.ckpt_interval
        if not every or self.start is None:
            return None
        n = int((now - self.start) // every)
        return self.start + n * every if n > 0 else None


@dataclass
class LiveReservation:
    name: str
    nodes: tuple[int, ...]
    users: tuple[str, ...]
    accounts: tuple[str, ...]
    start: float
    end: float

    def active(self, now: float) -> bool:
        return self.start <= now < self.end

    def admits(self, job: LiveJob) -> bool:
        return job.spec.user in self.users or job.spec.account in self.accounts


@dataclass
class NodeAdmin:
    """A node's administrative state: drain and its reason."""

    drained: bool = False
    reason: str = ""


@dataclass
class Stats:
    requeues: int = 0
    lost_gpu_h: float = 0.0


class LiveCluster:
    """See the module docstring. ``epoch`` is simulated time 0; times are seconds from it."""

    def __init__(
        self,
        nodes: Sequence[NodeSpec],
        epoch: datetime,
        *,
        cluster: str = "demo",
        partition: str = "batch",
    ) -> None:
        self.state = ClusterState(nodes)
        self.epoch = epoch
        self.cluster = cluster
        self.partition = partition
        self.now = 0.0
        self.index = {spec.name: i for i, spec in enumerate(self.state.nodes)}
        self.admin = [NodeAdmin() for _ in self.state.nodes]
        self.jobs: dict[str, LiveJob] = {}
        self.reservations: dict[str, LiveReservation] = {}
        self.on_node: dict[int, set[str]] = {i: set() for i in range(self.state.size)}
        self.stats = Stats()
        self._arrivals: list[tuple[float, int, str]] = []
        self._ends: list[tuple[float, int, str, int]] = []
        self._seq = 0
        self._dirty = True

    # -- building ---------------------------------------------------------------------

    def submit(
        self, job_id: str, spec: JobSpec, *, qos: str = "normal", requeue: bool = True
    ) -> None:
        """A job submitted at ``spec.submit`` (now or later); single node, whole GPUs."""
        if job_id in self.jobs:
            raise ValueError(f"job {job_id}: duplicate id")
        if spec.num_gpu < 1 or spec.gpu_milli != 1000:
            raise ValueError(f"job {job_id}: the live cluster runs whole-GPU jobs only")
        self.jobs[job_id] = LiveJob(
            job_id, spec, qos=qos, requeue=requeue, priority=spec.priority, begin=spec.submit
        )
        self._seq += 1
        heapq.heappush(self._arrivals, (spec.submit, self._seq, job_id))

    def running_since(self, job_id: str, node: str, gpu_ids: Iterable[int], start: float) -> None:
        """Start a submitted job at ``start`` (<= now) on those GPUs: the start state."""
        job = self.jobs[job_id]
        where = Placement(self.index[node], tuple(sorted(gpu_ids)))
        if not self.state.can_place(job.spec, where):
            raise ValueError(f"job {job_id}: {node} {where.gpus} is not free")
        self._arrivals = [a for a in self._arrivals if a[2] != job_id]
        heapq.heapify(self._arrivals)
        self._start(job, where, at=start)

    # -- time ---------------------------------------------------------------------------

    def clock(self) -> datetime:
        """Now, as a date (what the service's clock reads)."""
        return self.at(self.now)

    def at(self, t: float) -> datetime:
        return self.epoch + timedelta(seconds=t)

    def advance(self, to: float) -> None:
        """Run every event up to ``to`` (seconds since the epoch), scheduling after each."""
        if to < self.now:
            raise ValueError(f"time runs forward: {to} < {self.now}")
        if self._dirty:
            self._schedule()
        while (t := self._next_event()) is not None and t <= to:
            self.now = t
            self._events_at(t)
            self._schedule()
        self.now = to

    def _next_event(self) -> float | None:
        times = []
        if self._ends:
            times.append(self._ends[0][0])
        if self._arrivals:
            times.append(self._arrivals[0][0])
        times.extend(
            j.begin
            for j in self.jobs.values()
            if j.state == JobState.PENDING and j.begin > self.now
        )
        for r in self.reservations.values():
            times.extend(t for t in (r.start, r.end) if t > self.now)
        return max(min(times), self.now) if times else None

    def _events_at(self, t: float) -> None:
        while self._ends and self._ends[0][0] <= t:
            _, _, job_id, token = heapq.heappop(self._ends)
            job = self.jobs[job_id]
            if job.token == token and job.state == JobState.RUNNING:
                self._finish(job)
        while self._arrivals and self._arrivals[0][0] <= t:
            _, _, job_id = heapq.heappop(self._arrivals)
            self.jobs[job_id].reason = "None"
        for r in [r for r in self.reservations.values() if r.end <= t]:
            self._remove_reservation(r)

    # -- job life -----------------------------------------------------------------------

    def _submitted(self, job: LiveJob) -> bool:
        return job.spec.submit <= self.now

    def _start(self, job: LiveJob, where: Placement, at: float | None = None) -> None:
        start = self.now if at is None else at
        self.state.allocate(job.spec, where)
        job.state, job.reason, job.start, job.where = JobState.RUNNING, "None", start, where
        job.planned_start, job.end = None, None
        job.token += 1
        job.started_in = job.reservation
        if job.first_start is None:
            job.first_start = start
        self.on_node[where.node].add(job.id)
        run = max(0.0, job.spec.duration - job.done)
        limit = job.spec.time_limit
        length = run if limit is None else min(run, limit)
        self._seq += 1
        heapq.heappush(self._ends, (start + length, self._seq, job.id, job.token))

    def _release(self, job: LiveJob) -> None:
        assert job.where is not None
        self.state.release(job.spec, job.where)
        self.on_node[job.where.node].discard(job.id)
        self._dirty = True

    def _finish(self, job: LiveJob) -> None:
        self._release(job)
        assert job.start is not None
        # only the time limit ends a job before its work is done
        unfinished = job.done + (self.now - job.start) < job.spec.duration - 1e-6
        job.state = JobState.TIMEOUT if unfinished else JobState.COMPLETED
        job.end = self.now

    # -- scheduling ---------------------------------------------------------------------

    def _schedule(self) -> None:
        """One pass of the main scheduler and backfill (see the module docstring)."""
        self._dirty = False
        pending = sorted(
            (j for j in self.jobs.values() if j.state == JobState.PENDING and self._submitted(j)),
            key=lambda j: (-j.priority, j.spec.submit, _id_key(j.id)),
        )
        shadow: tuple[float, int] | None = None
        for job in pending:
            job.planned_start = None
            if job.held:
                job.reason = HELD
                continue
            if job.begin > self.now:
                job.reason = "BeginTime"
                continue
            allowed = self._allowed(job)
            if allowed is None:
                job.reason = "Reservation"
                continue
            if shadow is not None and not job.reservation and self.now + job.limit_s > shadow[0]:
                allowed = allowed.copy()
                allowed[shadow[1]] = False
            where = self._place(job, allowed)
            if where is not None:
                self._start(job, where)
                continue
            job.reason = "Resources"
            if shadow is None and not job.reservation:
                shadow = self._earliest(job, self._allowed(job))
                if shadow is not None:
                    job.planned_start = shadow[0]

    def _allowed(self, job: LiveJob) -> BoolArray | None:
        """Nodes the job may start on now, drains and reservations considered (None: it
        names a reservation that does not admit it now)."""
        ok = np.array([not a.drained for a in self.admin], dtype=np.bool_)
        if job.reservation:
            r = self.reservations.get(job.reservation)
            if r is None or not r.active(self.now) or not r.admits(job):
                return None
            inside = np.zeros(self.state.size, dtype=np.bool_)
            inside[list(r.nodes)] = True
            return ok & inside
        for r in self.reservations.values():
            if r.active(self.now):
                ok[list(r.nodes)] = False
        return ok

    def _place(self, job: LiveJob, allowed: BoolArray) -> Placement | None:
        node = first_in_order(self.state, self.state.feasible(job.spec) & allowed)
        if node is None:
            return None
        return Placement(node, gpus.lowest(self.state, node, job.spec))

    def _earliest(self, job: LiveJob, allowed: BoolArray | None) -> tuple[float, int] | None:
        """(time, node): the earliest the job fits on a node it may use, if every running
        job ends at its time limit; ties to the first node in cons_tres order."""
        if allowed is None:
            return None
        spec = job.spec
        ok = (
            allowed
            & self.state.model_mask(spec.gpu_models)
            & (self.state.gpu_count >= spec.num_gpu)
        )
        best: tuple[float, int] | None = None
        for n in (int(i) for i in self.state.slurm_order if ok[i]):
            topo = self.state.topologies[n]
            free = self.state.full_mask(n)
            ends = sorted(self._limit_end(self.jobs[j]) for j in self.on_node[n])
            t, i = self.now, 0
            while not _fits(spec, topo, free):
                if i == len(ends):
                    break
                t, m = ends[i]
                free |= m
                i += 1
            else:
                if best is None or t < best[0]:
                    best = (max(t, self.now), n)
        return best

    def _limit_end(self, job: LiveJob) -> tuple[float, int]:
        """When a running job ends at the latest, and the GPUs it frees then."""
        assert job.start is not None
        assert job.where is not None
        return job.start + job.limit_s, mask_of(job.where.gpus)

    # -- what the service does ----------------------------------------------------------

    def job(self, job_id: str) -> LiveJob:
        job = self.jobs.get(job_id)
        if job is None or not self._submitted(job):
            raise Refused("Invalid job id specified")
        return job

    def requeue(self, job_id: str) -> None:
        """``scontrol requeue``: back to pending, its work since its last checkpoint lost."""
        job = self.job(job_id)
        if job.state == JobState.PENDING:
            return
        if job.state != JobState.RUNNING:
            raise Refused("Job is no longer pending execution")
        if not job.requeue:
            raise Refused("Requested operation is presently disabled")
        assert job.start is not None
        ckpt = job.last_checkpoint(self.now)
        saved = 0.0 if ckpt is None else ckpt - job.start
        lost = gpu_hours(job.spec, self.now - job.start - saved)
        self._release(job)
        job.done += saved
        job.state, job.reason, job.where, job.start = JobState.PENDING, "BeginTime", None, None
        job.begin = self.now + REQUEUE_DELAY_S
        job.token += 1
        job.requeues += 1
        job.lost_gpu_h += lost
        self.stats.requeues += 1
        self.stats.lost_gpu_h += lost

    def set_reservation(self, job_id: str, name: str) -> None:
        """``ReservationName=``: attach a pending job ("" detaches any job)."""
        job = self.job(job_id)
        if not name:
            job.reservation = ""
            self._dirty = True
            return
        r = self.reservations.get(name)
        if r is None:
            raise Refused("Requested reservation is invalid")
        if job.state != JobState.PENDING:
            raise Refused("Job is no longer pending execution")
        if not r.admits(job):
            raise Refused("Access denied to requested reservation")
        job.reservation = name
        self._dirty = True

    def set_priority(self, job_id: str, priority: int) -> None:
        """``Priority=``: 0 holds a pending job (``scontrol hold``), more releases it."""
        job = self.job(job_id)
        if priority < 0:
            raise Refused("Invalid job priority")
        if priority == 0:
            if job.state != JobState.PENDING:
                raise Refused("Job is no longer pending execution")
            job.held, job.reason = True, HELD
        else:
            if job.held:
                job.held, job.reason = False, "None"
            job.priority = priority
        self._dirty = True

    def set_begin(self, job_id: str, at: float) -> None:
        """``StartTime=``: a pending job starts no earlier than ``at``."""
        job = self.job(job_id)
        if job.state != JobState.PENDING:
            raise Refused("Job is no longer pending execution")
        job.begin = max(at, job.spec.submit)
        self._dirty = True

    def set_comment(
        self, job_id: str, comment: str | None = None, admin: str | None = None
    ) -> None:
        job = self.job(job_id)
        if comment is not None:
            job.comment = comment
        if admin is not None:
            job.admin_comment = admin

    def create_reservation(
        self,
        name: str,
        nodes: Sequence[str],
        users: Sequence[str],
        accounts: Sequence[str],
        start: float,
        duration_s: float,
    ) -> None:
        """An IGNORE_JOBS reservation of whole nodes; the same one again is a no-op."""
        unknown = [n for n in nodes if n not in self.index]
        if unknown:
            raise Refused(f"Invalid node name specified: {unknown[0]}")
        if not users and not accounts:
            raise Refused("Reservation request lacks users or accounts")
        idx = tuple(sorted(self.index[n] for n in nodes))
        existing = self.reservations.get(name)
        if existing is not None:
            if existing.nodes == idx:
                return
            raise Refused("Duplicate reservation name")
        end = start + duration_s
        for r in self.reservations.values():
            if set(r.nodes) & set(idx) and r.start < end and start < r.end:
                raise Refused("Requested nodes are busy")  # overlap without OVERLAP flag
        self.reservations[name] = LiveReservation(
            name, idx, tuple(users), tuple(accounts), start, end
        )
        self._dirty = True

    def delete_reservation(self, name: str) -> None:
        """Remove a reservation (absent: nothing to do); refused while a job runs in it."""
        r = self.reservations.get(name)
        if r is None:
            return
        if any(j.state == JobState.RUNNING and j.reservation == name for j in self.jobs.values()):
            raise Refused("Reservation request busy")
        self._remove_reservation(r)

    def _remove_reservation(self, r: LiveReservation) -> None:
        del self.reservations[r.name]
        for j in self.jobs.values():
            if j.reservation == r.name and j.state == JobState.PENDING:
                j.reservation = ""
        self._dirty = True

    def node(self, name: str) -> int:
        n = self.index.get(name)
        if n is None:
            raise Refused("Invalid node name specified")
        return n

    def drain(self, name: str, reason: str) -> None:
        if not reason:
            raise Refused("You must specify a reason when DOWNING or DRAINING a node")
        a = self.admin[self.node(name)]
        a.drained, a.reason = True, reason
        self._dirty = True

    def resume(self, name: str) -> None:
        a = self.admin[self.node(name)]
        a.drained, a.reason = False, ""
        self._dirty = True

    def set_reason(self, name: str, reason: str) -> None:
        self.admin[self.node(name)].reason = reason

    def set_weight(self, name: str, weight: int) -> None:
        if not 0 <= weight <= 0xFFFFFFFE:
            raise Refused("Invalid weight")
        if self.state.set_weight(self.node(name), weight):
            self._dirty = True

    def set_features(self, name: str, features: Iterable[str]) -> None:
        if self.state.set_features(self.node(name), frozenset(features)):
            self._dirty = True

    # -- what the service reads ---------------------------------------------------------

    def snapshot(self) -> ClusterSnapshot:
        """The cluster now, as the service's readers return it."""
        active = {
            n: r.name for r in self.reservations.values() if r.active(self.now) for n in r.nodes
        }
        jobs = [self._job_model(j) for j in sorted(self.jobs.values(), key=lambda j: _id_key(j.id))]
        names = tuple(s.name for s in self.state.nodes)
        return ClusterSnapshot(
            cluster=self.cluster,
            taken_at=self.clock(),
            source="simulator",
            nodes=tuple(self._node_model(n, active.get(n)) for n in range(self.state.size)),
            jobs=tuple(j for j in jobs if j is not None),
            reservations=tuple(
                Reservation(
                    name=r.name,
                    nodes=tuple(names[n] for n in r.nodes),
                    start_time=self.at(r.start),
                    end_time=self.at(r.end),
                    users=r.users,
                    accounts=r.accounts,
                    flags=("IGNORE_JOBS", "SPEC_NODES"),
                    state="ACTIVE" if r.active(self.now) else "INACTIVE",
                )
                for r in self.reservations.values()
            ),
            partitions=(Partition(name=self.partition, nodes=names, preempt_mode="REQUEUE"),),
        )

    def _node_model(self, n: int, reservation: str | None) -> Node:
        spec, st = self.state.nodes[n], self.state
        used = frozenset(g for g in range(spec.gpus) if st.gpu_left[n, g] < 1000)
        base = (
            NodeFlag.IDLE
            if not used
            else NodeFlag.ALLOCATED
            if len(used) == spec.gpus
            else NodeFlag.MIXED
        )
        admin = self.admin[n]
        flags = {base, NodeFlag.DRAIN} if admin.drained else {base}
        return Node(
            name=spec.name,
            partitions=(self.partition,),
            state=frozenset(flags),
            gpu_model=spec.model,
            gpu_count=spec.gpus,
            gpu_memory_gb=GPU_MEMORY_GB.get(spec.model, 0.0),
            topology=spec.topology,
            gpus_used=used,
            reservation=reservation,
            features=tuple(sorted(st.features[n])),
            weight=int(st.weight[n]),
            reason=admin.reason,
        )

    def _job_model(self, job: LiveJob) -> Job | None:
        spec = job.spec
        if not self._submitted(job):
            return None
        if (
            job.end is not None
            and job.state != JobState.RUNNING
            and self.now - job.end > MIN_JOB_AGE_S
        ):
            return None  # gone from squeue
        common = {
            "id": job.id,
            "name": spec.name,
            "user": spec.user,
            "account": spec.account,
            "partition": self.partition,
            "qos": job.qos,
            "priority": 0 if job.held else job.priority,
            "state": job.state,
            "submit_time": self.at(spec.submit),
            "time_limit_s": int(job.limit_s),
            "requeue": job.requeue,
            "admin_comment": job.admin_comment,
        }
        if job.state == JobState.PENDING:
            model = spec.gpu_models
            return Job(
                **common,
                reason=job.reason,
                planned_start=None if job.planned_start is None else self.at(job.planned_start),
                comment=job.comment,
                request=GpuRequest(
                    gpus_per_node=spec.num_gpu,
                    nvlink=spec.nvlink and spec.num_gpu > 1,
                    gpu_model=next(iter(model)) if model is not None and len(model) == 1 else None,
                ),
            )
        assert job.where is not None
        assert job.start is not None
        ckpt = job.last_checkpoint(self.now) if job.state == JobState.RUNNING else None
        comment = job.comment
        if ckpt is not None:
            key = f"{CHECKPOINT_KEY}={self.at(ckpt).timestamp():.0f}"
            comment = f"{comment},{key}" if comment else key
        return Job(
            **common,
            start_time=self.at(job.start),
            comment=comment,
            gpus={self.state.nodes[job.where.node].name: frozenset(job.where.gpus)},
        )


def _fits(spec: JobSpec, topo: GpuTopology, free: int) -> bool:
    if spec.nvlink and spec.num_gpu > 1:
        return bool(topo.free_blocks(free, spec.num_gpu))
    return popcount(free) >= spec.num_gpu


def _id_key(job_id: str) -> tuple[int, str]:
    return (int(job_id), "") if job_id.isdigit() else (1 << 62, job_id)
