"""The simulator's state as a :class:`~slurm_defrag.domain.cluster.ClusterSnapshot`.

This is what the planner reads in the service, so the simulator hands it the same thing.
The snapshot model has whole GPUs with one owner each; the translation:

* a GPU shared by fractional jobs (Slurm ``shard``\\ s) is, by default, reported busy by an
  unknown owner (``gpus_used``): immovable. With ``shared_victims`` it is shown as one
  running job per GPU, a *bundle* of the jobs sharing it (id ``shared:<node>:<gpu>``,
  their CPUs and memory summed): freeing a GPU shared by shards means requeueing every job
  on it, which is what requeueing the bundle stands for (:attr:`SimSnapshot.bundles`);
* CPU and memory are in whole CPUs and MiB: a node's free CPUs are rounded down, a
  target's CPUs up and a victim's down, so a plan never counts on CPUs that are not
  there; CPU-only jobs (and, by default, fractional ones) hold their CPUs immovably
  (``cpus_alloc``);
* with ``cost_by_share`` (Protocol A, where no time passes and every job "started" at 0)
  each running job is shown as started :data:`HELD_HOURS` x the GPUs it holds ago, so the
  planner's cost (GPU-hours lost) is proportional to the GPU capacity a requeue takes away:
  a bundle holding 0.81 of a GPU costs 0.81 x that of a whole-GPU job.

* time limits are what the job asked for (:attr:`JobSpec.estimate`: the user's limit
  when set), never the run time the simulator knows -- the planner sees what Slurm shows;
* a checkpointing job that has checkpointed since it started carries
  ``defrag:ckpt=<epoch seconds>`` in its comment, as a job script would write it
  (:mod:`slurm_defrag.policy.comment_keys`), so the planner's cost counts only the work
  since that checkpoint;
* GPUs a reservation holds are busy by an unknown owner (immovable).

Job ids are the simulator's job indices as strings; node names are the trace's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from slurm_defrag.domain.cluster import (
    ClusterSnapshot,
    GpuRequest,
    Job,
    JobState,
    Node,
    NodeFlag,
    Partition,
)
from slurm_defrag.domain.units import MILLI
from slurm_defrag.policy.comment_keys import CHECKPOINT_KEY
from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.defrag import DefragView, RunningJob
from slurm_defrag.sim.model import JobSpec

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
"""Simulated time 0."""
PARTITION = "batch"
HELD_HOURS = 10.0
"""``cost_by_share``: a whole GPU held counts as this many hours of lost work. Large enough
that the policy's minimum-runtime protection (10 min) spares only shares under 1.7 %."""
BUNDLE_PREFIX = "shared:"


def at(seconds: float) -> datetime:
    return EPOCH + timedelta(seconds=seconds)


@dataclass(frozen=True)
class ViewOptions:
    max_targets: int = 10
    """Targets: the first pending whole-GPU jobs in queue order, at most this many."""
    queue_head: int | None = None
    """Targets only among the first this many pending jobs of the queue, whatever their
    size (Slurm's priority order); None: anywhere in it. A large job further back waits
    for priority, not for fragmentation: serving it would overtake the jobs ahead of it,
    the site's fair-share order (issue #41)."""
    min_gpus: int = 1
    """Only pending jobs of at least this many GPUs are targets."""
    keep_gpus: int | None = None
    """Running jobs of this many GPUs or more are shown with ``Requeue=0`` (never victims)."""
    shared_victims: bool = False
    """Show each GPU shared by fractional jobs as one requeueable bundle (module docstring)."""
    cost_by_share: bool = False
    """Start times that make a victim's cost its GPU share (Protocol A)."""
    nodes: tuple[int, ...] | None = None
    """Only these nodes (indices) and the jobs on them; None: all."""


@dataclass(frozen=True)
class SimSnapshot:
    snapshot: ClusterSnapshot
    bundles: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Bundle job id -> the simulator job ids sharing that GPU."""

    def requeues(self, victim_ids: Iterable[str]) -> tuple[int, ...]:
        """The simulator jobs to requeue for the planner's victims (bundles expanded)."""
        out: list[int] = []
        for v in victim_ids:
            out.extend(self.bundles.get(v, (int(v),) if not v.startswith(BUNDLE_PREFIX) else ()))
        return tuple(out)


def target_jobs(
    pending: Sequence[tuple[int, JobSpec]], opts: ViewOptions
) -> list[tuple[int, JobSpec]]:
    """The pending jobs shown as targets: whole-GPU jobs of at least ``min_gpus`` GPUs,
    the first ``max_targets`` in queue order (among its first ``queue_head`` jobs)."""
    head = pending if opts.queue_head is None else pending[: opts.queue_head]
    whole = [
        (jid, j) for jid, j in head if j.num_gpu >= max(1, opts.min_gpus) and j.gpu_milli == MILLI
    ]
    return whole[: opts.max_targets]


def _one_model(models: frozenset[str] | None) -> str | None:
    """A snapshot request names one GPU type; a job accepting several is shown as "any" (the
    simulator refuses a planned placement on a type the job does not accept)."""
    return next(iter(models)) if models is not None and len(models) == 1 else None


class _Builder:
    def __init__(self, view: DefragView, opts: ViewOptions) -> None:
        self.view, self.opts = view, opts
        self.state = view.state
        self.keep = set(range(self.state.size)) if opts.nodes is None else set(opts.nodes)
        self.jobs: list[Job] = []
        self.held: dict[int, set[int]] = {}
        """node -> GPUs shown with an owner (whole-GPU jobs and bundles)."""
        self.bundles: dict[str, tuple[int, ...]] = {}

    def started(self, r: RunningJob, gpus_held: float) -> datetime:
        if self.opts.cost_by_share:
            return at(self.view.now - HELD_HOURS * 3600 * gpus_held / max(1, r.job.num_gpu))
        return at(r.start)

    def comment(self, r: RunningJob) -> str:
        ckpt = None if self.opts.cost_by_share else r.last_checkpoint(self.view.now)
        return "" if ckpt is None else f"{CHECKPOINT_KEY}={at(ckpt).timestamp():.0f}"

    def add_whole(self, jid: int, r: RunningJob) -> None:
        n = r.where.node
        self.held.setdefault(n, set()).update(r.where.gpus)
        keep = self.opts.keep_gpus
        self.jobs.append(
            Job(
                id=str(jid),
                name=r.job.name,
                partition=PARTITION,
                state=JobState.RUNNING,
                priority=r.job.priority,
                submit_time=at(r.job.submit),
                start_time=self.started(r, r.job.num_gpu),
                time_limit_s=int(r.job.estimate) + 1,
                comment=self.comment(r),
                gpus={self.state.nodes[n].name: frozenset(r.where.gpus)},
                cpus_per_node=r.job.cpu_milli // MILLI,
                memory_mb_per_node=r.job.memory_mib,
                requeue=keep is None or r.job.num_gpu < keep,
            )
        )

    def add_bundle(self, n: int, g: int, members: list[tuple[int, RunningJob]]) -> None:
        bid = f"{BUNDLE_PREFIX}{n}:{g}"
        self.bundles[bid] = tuple(jid for jid, _ in members)
        self.held.setdefault(n, set()).add(g)
        cpu = sum(r.job.cpu_milli for _, r in members)
        share = sum(r.job.gpu_milli for _, r in members) / MILLI
        first = min(members, key=lambda m: m[1].start)[1]
        self.jobs.append(
            Job(
                id=bid,
                name=bid,
                partition=PARTITION,
                state=JobState.RUNNING,
                priority=max(r.job.priority for _, r in members),
                submit_time=at(min(r.job.submit for _, r in members)),
                start_time=self.started(first, share),
                time_limit_s=int(max(r.job.estimate for _, r in members)) + 1,
                gpus={self.state.nodes[n].name: frozenset({g})},
                cpus_per_node=cpu // MILLI,
                memory_mb_per_node=sum(r.job.memory_mib for _, r in members),
            )
        )

    def running(self) -> None:
        shared: dict[tuple[int, int], list[tuple[int, RunningJob]]] = {}
        for jid, r in self.view.running.items():
            if r.where.node not in self.keep or not r.job.num_gpu:
                continue
            if r.job.gpu_milli == MILLI:
                self.add_whole(jid, r)
            elif self.opts.shared_victims:
                shared.setdefault((r.where.node, r.where.gpus[0]), []).append((jid, r))
        for (n, g), members in sorted(shared.items()):
            self.add_bundle(n, g, members)

    def node(self, n: int) -> Node:
        spec, state = self.state.nodes[n], self.state
        held = self.held.get(n, set())
        unknown = frozenset(
            g for g in range(spec.gpus) if state.gpu_left[n, g] < MILLI and g not in held
        )
        busy = (
            state.gpu_left[n].sum() < state.gpu_cap[n].sum() or state.cpu_left[n] < state.cpu_cap[n]
        )
        return sim_node(state, n, busy=busy, gpus_used=unknown)

    def targets(self) -> None:
        opts = self.opts
        for jid, j in target_jobs(self.view.pending, opts):
            if jid in self.view.held:
                continue
            self.jobs.append(
                Job(
                    id=str(jid),
                    name=j.name,
                    partition=PARTITION,
                    state=JobState.PENDING,
                    reason="Resources",
                    priority=j.priority,
                    submit_time=at(j.submit),
                    planned_start=at(t) if (t := self.view.planned.get(jid)) is not None else None,
                    time_limit_s=int(j.estimate) + 1,
                    request=GpuRequest(
                        gpus_per_node=j.num_gpu, nvlink=j.nvlink, gpu_model=_one_model(j.gpu_models)
                    ),
                    cpus_per_node=-(-j.cpu_milli // MILLI),
                    memory_mb_per_node=j.memory_mib,
                    # what job_submit.lua's --exclude holds (a comma list is a host list)
                    excluded_nodes=",".join(sorted(j.exclude or ())),
                )
            )

    def build(self) -> SimSnapshot:
        self.running()
        self.targets()
        nodes = tuple(self.node(n) for n in sorted(self.keep))
        snapshot = ClusterSnapshot(
            cluster="simulator",
            taken_at=at(self.view.now),
            source="simulator",
            nodes=nodes,
            jobs=tuple(self.jobs),
            partitions=(
                Partition(
                    name=PARTITION, nodes=tuple(n.name for n in nodes), preempt_mode="REQUEUE"
                ),
            ),
        )
        return SimSnapshot(snapshot, self.bundles)


def to_snapshot(view: DefragView, opts: ViewOptions | None = None) -> SimSnapshot:
    """The view as a snapshot for the planner (see :class:`ViewOptions`)."""
    return _Builder(view, opts or ViewOptions()).build()


def sim_node(state: ClusterState, n: int, *, busy: bool, **extra: object) -> Node:
    """Node ``n`` of the simulator as a snapshot node; ``extra`` adds per-use fields
    (which GPUs count as used, shard usage, Weight)."""
    spec = state.nodes[n]
    cpus = spec.cpu_milli // MILLI
    return Node.model_validate(
        {
            "name": spec.name,
            "partitions": (PARTITION,),
            "state": frozenset({NodeFlag.MIXED if busy else NodeFlag.IDLE}),
            "gpu_model": spec.model if spec.gpus else None,
            "gpu_count": spec.gpus,
            "topology": spec.topology,
            "cpus": cpus,
            "cpus_alloc": cpus - int(state.cpu_left[n]) // MILLI,
            "memory_mb": spec.memory_mib,
            "memory_alloc_mb": spec.memory_mib - int(state.mem_left[n]),
            **extra,
        }
    )
