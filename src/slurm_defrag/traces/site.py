"""A site's own workload: its accounting's jobs on its node inventory, for Protocol B.

``simulate --workload sacct:FILE`` replays the jobs a site's ``sacct`` recorded
(:func:`slurm_defrag.slurm.parse.sacct.read_site_jobs`) on the nodes of a snapshot of that site
(a file, or the live cluster). The translation (docs/site-workload.md):

* **Nodes**: every node of the snapshot, whatever its state (the inventory, not what is up
  today), in the snapshot's order, with its GPUs, GPU model (``none`` without GPUs),
  Weight (1 when unset), features and topology (a built-in one with the node's GPU count;
  PCIe only otherwise). CPUs and memory as the snapshot has them (CPUTot, RealMemory); a
  node whose snapshot does not track them (``null``) is not limited by them.
* **Jobs**: arrival = Submit (the first record's, for a requeued job), run time = Elapsed
  of the last record (End - Start without Elapsed), at least 1 s; time limit = Timelimit
  (never below the run time: a job that ran past it was allowed to; unlimited: the run
  time, what backfill then plans with); GPUs, CPUs and memory the job's totals, all on one
  node; a GPU model only when the request named one (``ReqTRES gres/gpu:a100=2``); user and
  account as recorded. Time 0 is the first submit.
* **Left out, counted**: multi-node jobs (the simulator places a job on one node; a job
  spread over nodes has no one-node shape to replay), besides what the reader skipped
  (steps, jobs that never started or still run, bad records).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from slurm_defrag.domain.accounting import SiteJob
from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.domain.topology import BUILTIN_TOPOLOGIES
from slurm_defrag.domain.units import MILLI
from slurm_defrag.errors import InputError
from slurm_defrag.sim.model import JobSpec, NodeSpec

UNTRACKED = 1 << 40
"""Capacity of a node whose snapshot does not track CPUs or memory: never a limit."""
MULTI_NODE = "multi-node jobs (the simulator places a job on one node)"


@dataclass(frozen=True)
class SiteWorkload:
    nodes: list[NodeSpec]
    jobs: list[JobSpec]
    left_out: dict[str, int]
    span_s: float
    """Last submit - first submit."""
    first_submit_t: float
    """Epoch seconds of time 0."""

    @property
    def offered_load(self) -> float:
        """GPU-seconds the jobs ask for / (the inventory's GPUs x the span)."""
        gpus = sum(n.gpus for n in self.nodes)
        if not gpus or self.span_s <= 0:
            return 0.0
        work = sum(j.total_milli / MILLI * j.duration for j in self.jobs)
        return work / (gpus * self.span_s)


def inventory(snapshot: ClusterSnapshot) -> list[NodeSpec]:
    """The snapshot's nodes as the simulator's (module docstring)."""
    out = []
    for n in snapshot.nodes:
        topo = BUILTIN_TOPOLOGIES.get(n.topology or "")
        out.append(
            NodeSpec(
                name=n.name,
                cpu_milli=UNTRACKED if n.cpus is None else n.cpus * MILLI,
                memory_mib=UNTRACKED if n.memory_mb is None else n.memory_mb,
                gpus=n.gpu_count,
                model=(n.gpu_model or "none") if n.gpu_count else "none",
                topology=n.topology if topo is not None and topo.gpu_count == n.gpu_count else None,
                weight=1 if n.weight is None else n.weight,
                features=frozenset(n.features),
            )
        )
    if not out:
        raise InputError(f"snapshot of {snapshot.cluster}: no nodes to simulate")
    return out


def site_workload(jobs: Sequence[SiteJob], snapshot: ClusterSnapshot) -> SiteWorkload:
    """The simulator's nodes and jobs for ``jobs`` (in submit order) on ``snapshot``."""
    nodes = inventory(snapshot)
    left_out: dict[str, int] = {}
    kept = [j for j in jobs if j.nodes <= 1]
    if len(kept) < len(jobs):
        left_out[MULTI_NODE] = len(jobs) - len(kept)
    if not kept:
        raise InputError("the accounting holds no one-node job that ran: nothing to simulate")
    t0 = min(j.submit_t for j in kept)
    specs = [_spec(j, t0) for j in kept]
    span = max(s.submit for s in specs)
    return SiteWorkload(nodes, specs, left_out, span, t0)


def _spec(job: SiteJob, t0: float) -> JobSpec:
    run = max(job.run_s, 1.0)
    limit = None if job.time_limit_s is None else max(job.time_limit_s, run)
    return JobSpec(
        name=job.job_id,
        cpu_milli=job.cpus * MILLI,
        memory_mib=job.memory_mb,
        num_gpu=job.gpus,
        gpu_milli=MILLI if job.gpus else 0,
        gpu_models=frozenset({job.gpu_model}) if job.gpus and job.gpu_model else None,
        submit=job.submit_t - t0,
        duration=run,
        time_limit=limit,
        user=job.user,
        account=job.account,
    )
