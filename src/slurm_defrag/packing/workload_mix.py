"""The workload mix the FGD measure weighs, estimated from the cluster's own jobs.

FGD (Weng et al., ATC '23) counts a node's free GPUs as fragmented when the request types
the cluster sees cannot use them, weighed by how common each type is. The simulator takes
that mix from the trace; a site has no trace, so the service counts the jobs it sees in
its snapshots: each job once (by id), as the request one of its nodes holds or needs
(CPUs per node, GPUs per node, a GPU model when a pending job names one), over the most
recent ``keep`` jobs, so the estimate follows the workload as it changes.

A job asking for shards (``--gres=shard:S``) is a share of one GPU: S over the cluster's
shards per GPU (:attr:`ClusterSnapshot.shards_per_gpu`), in milli-GPUs. What it cannot
see: a running job's GPU type constraint (only the GPUs it got), documented with the
``fgd-route`` levers (docs/service.md).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from slurm_defrag.domain.cluster import ClusterSnapshot, Job, JobState
from slurm_defrag.domain.units import MILLI, share_milli
from slurm_defrag.packing.fit_classes import Mix, TaskClass

KEEP_JOBS = 5000
"""Jobs the estimate remembers: about a day of arrivals on a busy 1,000-GPU cluster."""
MAX_TYPES = 64
"""Types handed to job_submit.lua at most: its cost per submission grows with them."""
COVERAGE = 0.95
"""The most common types that together cover this share of the jobs, as FGD's artifact
keeps them (its ``typical pods``): the rest, a long tail of odd CPU counts, are left out."""


def job_class(job: Job, shards_per_gpu: int | None = None) -> TaskClass | None:
    """The per-node request of ``job`` (weight 1); None when nothing tells its shape.

    ``shards_per_gpu``: the cluster's (None: no node shares GPUs, a shard ask is ignored).
    """
    cpus = max(1, job.cpus_per_node)
    if job.shards and shards_per_gpu and not job.gpus and job.request is None:
        return TaskClass(cpus, 1, share_milli(job.shards, shards_per_gpu), 1.0)
    if job.state == JobState.PENDING:
        req = job.request
        if req is None:
            return TaskClass(cpus, 0, 0, 1.0) if job.cpus_per_node else None
        shape = req.per_node_shape()
        if shape is None:  # --gpus=N spread as Slurm likes: no per-node size to count
            return None
        models = frozenset({req.gpu_model}) if req.gpu_model else None
        return TaskClass(cpus, shape[1], MILLI, 1.0, models)
    if not job.holds_gpus:
        return TaskClass(cpus, 0, 0, 1.0) if job.cpus_per_node else None
    per_node = max(len(g) for g in job.gpus.values())
    return TaskClass(cpus, per_node, MILLI, 1.0)


class MixEstimate:
    """The request types of the last ``keep`` jobs seen, as a :class:`Mix`."""

    def __init__(
        self, keep: int = KEEP_JOBS, max_types: int = MAX_TYPES, coverage: float = COVERAGE
    ) -> None:
        if keep < 1 or max_types < 1:
            raise ValueError("keep and max_types must be at least 1")
        if not 0 < coverage <= 1:
            raise ValueError("coverage must be in (0, 1]")
        self.keep = keep
        self.max_types = max_types
        self.coverage = coverage
        self._seen: OrderedDict[str, TaskClass] = OrderedDict()
        self._shown: set[str] = set()
        """The previous snapshot's job ids: a job it showed and ``keep`` newer ones
        pushed out is not counted again while it stays (long-pending, long-running)."""

    def __len__(self) -> int:
        return len(self._seen)

    def observe(self, jobs: Iterable[tuple[str, TaskClass | None]]) -> None:
        """Count each new job id once (a job seen again keeps its first shape)."""
        for job_id, task in jobs:
            if task is None or job_id in self._seen:
                continue
            self._seen[job_id] = task
            if len(self._seen) > self.keep:
                self._seen.popitem(last=False)

    def observe_snapshot(self, snapshot: ClusterSnapshot) -> None:
        per_gpu = snapshot.shards_per_gpu
        self.observe(
            (j.id, job_class(j, per_gpu)) for j in snapshot.jobs if j.id not in self._shown
        )
        self._shown = {j.id for j in snapshot.jobs}

    def mix(self) -> Mix | None:
        """The most common types covering ``coverage`` of the jobs (at most ``max_types``),
        weighted by jobs; None before any job."""
        counts: dict[TaskClass, int] = {}
        for task in self._seen.values():
            counts[task] = counts.get(task, 0) + 1
        if not counts:
            return None
        # most common first; ties in a fixed order so the same jobs give the same table
        ranked = sorted(
            counts.items(),
            key=lambda kv: (-kv[1], kv[0].gpus, kv[0].cpus, sorted(kv[0].models or ())),
        )
        kept: list[TaskClass] = []
        covered = 0
        for t, n in ranked[: self.max_types]:
            if covered >= self.coverage * len(self._seen):
                break
            kept.append(TaskClass(t.cpus, t.gpus, t.milli, float(n), t.models))
            covered += n
        return Mix(tuple(kept))
