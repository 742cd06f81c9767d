"""Backfill's plan: when and where could a blocked job start?

Slurm's backfill scheduler plans pending jobs into the future using running jobs' time
limits and lets lower-priority jobs start now only if they do not delay those plans.
Expected end of a running job = start + :attr:`JobSpec.estimate` (the run time unless a
time limit is set: perfect estimates by default; real users over-estimate, which makes
backfill less effective than here). Two ways of planning (``EngineConfig.bf_reserve``):

* ``head`` — EASY backfill, :func:`reserve`: only the blocked head job is planned; for
  each node that could ever host it, that node's running jobs are released in order of
  expected end until the job fits, and the earliest such time and node are reserved;
* ``all`` — what slurmctld's ``sched/backfill`` does (``_attempt_backfill`` in
  ``src/plugins/sched/backfill/backfill.c``), :func:`plan`: every pending job it tests
  and cannot start now is planned, and the plan blocks the *whole node* (``node_space``
  holds node bitmaps, not GPUs) from the planned start to start + time limit, both
  rounded down to ``bf_resolution`` seconds (:class:`Plans`). A later job may start now
  only on nodes no plan blocks during [now, now + its time limit]. The planned start
  comes from the select plugin's will-run test (:func:`will_run`, cons_tres
  ``_will_run_test``), which releases running jobs in *groups* whose ends fall in a time
  window (30 s past a 30 s boundary, doubled after every group that was not enough), so
  a plan starts when the last job of the deciding group ends, not at the first moment
  the job fits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from slurm_defrag.sim.cluster_state import BoolArray, ClusterState, IntArray
from slurm_defrag.sim.defrag import RunningJob
from slurm_defrag.sim.model import JobSpec

NodePicker = Callable[[BoolArray], int]
"""Which of the nodes marked True a planned job gets (the node selection rule)."""

WILL_RUN_WINDOW = 30.0
"""cons_tres ``_will_run_test``'s first time window (seconds) for grouping job ends."""


def first_in_order(state: ClusterState) -> NodePicker:
    """The node choice without topology: the first node in Slurm's node order."""
    return lambda where: int(state.slurm_order[int(np.argmax(where[state.slurm_order]))])


@dataclass(frozen=True)
class Reservation:
    node: int
    start: float
    end: float = math.inf
    """When the node is free again for others (EASY does not need it: infinity)."""


@dataclass
class Plans:
    """The reservations one backfill pass has made so far (Slurm's ``node_space`` map)."""

    resolution: float = 0.0
    """Round plans down to multiples of this many seconds (Slurm's ``bf_resolution``)."""
    made: list[Reservation] = field(default_factory=list)

    def _round(self, t: float) -> float:
        return math.floor(t / self.resolution) * self.resolution if self.resolution else t

    def add(self, node: int, start: float, estimate: float, now: float) -> Reservation:
        """Block ``node`` for a job planned to start at ``start`` (``_add_reservation``:
        both ends rounded down, at least one resolution step long)."""
        begin = max(self._round(start), now)
        end = max(self._round(start + estimate), begin + self.resolution)
        res = Reservation(node, begin, end)
        self.made.append(res)
        return res

    def _overlapping(self, start: float, estimate: float) -> list[Reservation]:
        # backfill.c: a node_space record counts if it ends after the start and begins
        # no later than the end
        return [r for r in self.made if r.end > start and r.start <= start + estimate]

    def blocked(self, size: int, start: float, estimate: float) -> BoolArray:
        """Nodes a job running [start, start + estimate] must avoid."""
        out = np.zeros(size, dtype=bool)
        for r in self._overlapping(start, estimate):
            out[r.node] = True
        return out

    def clash(self, node: int, start: float, estimate: float) -> bool:
        """Whether a plan on ``node`` overlaps [start, start + estimate]."""
        return any(r.node == node for r in self._overlapping(start, estimate))

    def shrinks(self, start: float) -> float | None:
        """The first time after ``start`` when a node no plan blocks since ``start``
        becomes planned (backfill.c's ``later_start``: the nodes usable from ``start`` on
        are not all usable after it)."""
        for b in sorted({r.start for r in self.made if r.start > start}):
            newly = {r.node for r in self.made if r.start == b}
            before = {r.node for r in self.made if r.start < b and r.end > start}
            if newly - before:
                return b
        return None


def _fits(cpu: int, mem: int, row: IntArray, job: JobSpec) -> bool:
    if cpu < job.cpu_milli or mem < job.memory_mib:
        return False
    return not job.num_gpu or int((row >= job.gpu_milli).sum()) >= job.num_gpu


def _capable(state: ClusterState, job: JobSpec) -> BoolArray:
    """Nodes that could host ``job`` when empty."""
    capable: BoolArray = (
        (state.cpu_cap >= job.cpu_milli)
        & (state.mem_cap >= job.memory_mib)
        & (state.gpu_count >= job.num_gpu)
    )
    if job.num_gpu:
        capable &= state.model_mask(job.gpu_models)
    if job.exclude:
        capable &= state.allowed(job.exclude)
    return capable


def _expected_end(r: RunningJob) -> float:
    return r.start + r.job.estimate


def reserve(
    state: ClusterState,
    job: JobSpec,
    on_node: Mapping[int, Iterable[int]],
    running: Mapping[int, RunningJob],
    now: float,
) -> Reservation | None:
    """EASY: earliest (time, node) where ``job`` fits once running jobs end; None if never.

    NVLink needs are not checked against future free blocks (counts only): a reservation
    is a plan, the job still needs a real block when it starts.
    """
    best: Reservation | None = None
    for n in np.flatnonzero(_capable(state, job)):
        node = int(n)
        cpu, mem = int(state.cpu_left[node]), int(state.mem_left[node])
        row = state.gpu_left[node].copy()
        ok = _fits(cpu, mem, row, job)
        when = now
        if not ok:
            ends = sorted((_expected_end(running[i]), i) for i in on_node.get(node, ()))
            for end, i in ends:  # release in order of expected end, cheapest first
                if best is not None and end >= best.start:
                    break
                r = running[i]
                cpu += r.job.cpu_milli
                mem += r.job.memory_mib
                for g in r.where.gpus:
                    row[g] += r.job.gpu_milli
                if _fits(cpu, mem, row, job):
                    ok, when = True, end
                    break
        if ok and (best is None or when < best.start):
            best = Reservation(node, max(when, now))
            if when <= now:
                break
    return best


Release = tuple[float, int, int, int, tuple[int, ...], int]
"""What a running job gives back at its expected end (start + time limit): (end, node,
CPU, memory, GPU indices, milli-GPU on each). Plain tuples: will-run walks millions."""


@dataclass(frozen=True)
class EndQueue:
    """Running jobs by expected end (ties by job id, as will-run sorts them) and what is
    free now, in plain ints. A backfill pass asks will-run of many jobs against the same
    running set and free state: build this once per state (:func:`end_queue`)."""

    releases: list[Release]
    cpu: list[int]
    mem: list[int]
    gpu: list[list[int]]


def end_queue(state: ClusterState, running: Mapping[int, RunningJob]) -> EndQueue:
    ordered = sorted(running.items(), key=lambda kv: (_expected_end(kv[1]), kv[0]))
    return EndQueue(
        releases=[
            (
                _expected_end(r),
                r.where.node,
                r.job.cpu_milli,
                r.job.memory_mib,
                tuple(r.where.gpus),
                r.job.gpu_milli,
            )
            for _, r in ordered
        ],
        cpu=state.cpu_left.tolist(),
        mem=state.mem_left.tolist(),
        gpu=state.gpu_left.tolist(),
    )


def fits_now(state: ClusterState, job: JobSpec, usable: BoolArray) -> BoolArray:
    """Usable nodes where ``job`` fits on what is free now (counts, as :func:`_fits`)."""
    ok = usable & (state.cpu_left >= job.cpu_milli) & (state.mem_left >= job.memory_mib)
    if job.num_gpu:
        ok &= (state.gpu_left >= job.gpu_milli).sum(axis=1) >= job.num_gpu
    return ok


def will_run(
    state: ClusterState,
    job: JobSpec,
    usable: BoolArray,
    running: Mapping[int, RunningJob],
    now: float,
    pick: NodePicker,
    ends: EndQueue | None = None,
) -> Reservation | None:
    """When and where ``job`` could start on the ``usable`` nodes as running jobs end.

    Mirrors cons_tres ``_will_run_test``: running jobs on usable nodes are released in
    order of expected end, in groups: up to a barrier (the first job's end rounded up to
    the next multiple of 30 s) plus a window that starts at 30 s and doubles after each
    group that was not enough. The job is tested after each group, its start is the
    expected end of the group's last job, and ``pick`` chooses among the nodes where it
    then fits. (The barrier is on the clock, so simulator time 0 should be a whole
    minute of Unix time to reproduce Slurm's groups.) ``ends``: :func:`end_queue` of
    this state and ``running``, when the caller has it.

    Only the nodes a group touched can have started to fit (resources only grow while
    jobs are released), so each test looks at those alone.
    """
    usable = usable & _capable(state, job)
    now_ok = fits_now(state, job, usable)
    if now_ok.any():
        return Reservation(pick(now_ok), now)
    q = end_queue(state, running) if ends is None else ends
    use = usable.tolist()
    queue = (r for r in q.releases if use[r[1]])
    head = next(queue, None)
    if head is None:
        return None
    need_cpu, need_mem, need_gpus = job.cpu_milli, job.memory_mib, job.num_gpu
    milli = job.gpu_milli
    # per touched node: [free CPU, free memory, GPUs with the job's share free] and each
    # GPU's free milli
    free: dict[int, list[int]] = {}
    rows: dict[int, list[int]] = {}
    window = WILL_RUN_WINDOW
    barrier = (math.floor(head[0] / window) + 1) * window
    while head is not None:
        touched: set[int] = set()
        while True:
            end, n, cpu, mem, gpus, share = head
            acc = free.get(n)
            if acc is None:
                row = rows[n] = q.gpu[n][:]
                acc = free[n] = [q.cpu[n], q.mem[n], sum(1 for v in row if v >= milli)]
            else:
                row = rows[n]
            acc[0] += cpu
            acc[1] += mem
            for g in gpus:
                before = row[g]
                row[g] = before + share
                if before < milli <= row[g]:
                    acc[2] += 1
            touched.add(n)
            head = next(queue, None)
            if head is None or head[0] > barrier + window:
                break
        ok = [
            n
            for n in touched
            if free[n][0] >= need_cpu
            and free[n][1] >= need_mem
            and (not need_gpus or free[n][2] >= need_gpus)
        ]
        if ok:
            where = np.zeros_like(usable)
            where[ok] = True
            return Reservation(pick(where), max(end, now))
        window *= 2
        while head is not None and head[0] > barrier + window:
            window *= 2
    return None


def plan(
    state: ClusterState,
    job: JobSpec,
    running: Mapping[int, RunningJob],
    now: float,
    plans: Plans,
    pick: NodePicker,
    ends: EndQueue | None = None,
) -> Reservation | None:
    """Slurm's plan for a job that cannot start now (``_attempt_backfill``): will-run on
    the nodes no earlier plan blocks during [start, start + time limit], from start =
    now. If the planned start lies after the moment those nodes stop being all usable
    (:meth:`Plans.shrinks`), or the chosen node's plans clash with it, try again from
    that later moment (``TRY_LATER``). None if the job never fits. ``ends``: as for
    :func:`will_run`."""
    if ends is None:
        ends = end_queue(state, running)
    start = now
    for _ in range(2 * len(plans.made) + 2):  # each retry moves past a plan boundary
        usable = ~plans.blocked(state.size, start, job.estimate)
        found = will_run(state, job, usable, running, now, pick, ends)
        later = plans.shrinks(start)
        if found is None:
            if later is None:
                return None
            start = later
            continue
        when = max(found.start, start)
        if later is not None and when > later:
            start = later
        elif plans.clash(found.node, when, job.estimate) and when > start:
            start = when
        else:
            return Reservation(found.node, when)
    return None
