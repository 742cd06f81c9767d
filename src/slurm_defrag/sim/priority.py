"""Job priority in the engine: none (the trace's, FIFO among equals) or priority/multifactor.

The engine (:mod:`slurm_defrag.sim.engine`) asks a :class:`PriorityModel` for a job's
priority when it is submitted, tells it when jobs start and stop, and every
``period`` seconds lets it recompute every pending job's priority, as slurmctld's decay
thread does every ``PriorityCalcPeriod``. Without a model a job keeps the priority it came
with (0, or job_submit.lua's boost): the simulator's behaviour before issue #41, kept.

:class:`Multifactor` is priority/multifactor with Fair Tree: the decay thread's usage
(:mod:`slurm_defrag.sim.usage`), the fair-share factors (:mod:`slurm_defrag.sim.fair_tree`)
and each job's factors (:mod:`slurm_defrag.sim.multifactor`). A job's nice is what it came
with: ``JobSpec.priority`` is the negative of the nice job_submit.lua set
(:mod:`slurm_defrag.sim.submit_hook`), so the boost is added to the factors, as in Slurm.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from slurm_defrag.domain.units import MILLI
from slurm_defrag.sim.fair_tree import Assoc, fair_tree, user_key
from slurm_defrag.sim.model import JobSpec
from slurm_defrag.sim.multifactor import ClusterSize, JobFactors, MultifactorConfig, job_factors
from slurm_defrag.sim.usage import UsageLedger, billing


class PriorityModel(Protocol):
    period: float
    """Seconds between recalculations."""

    def submitted(self, jid: int, job: JobSpec, now: float) -> int:
        """The priority of a job arriving now (its ``priority`` is its nice, negated)."""
        ...

    def started(self, jid: int, job: JobSpec, now: float) -> None: ...

    def stopped(self, jid: int, job: JobSpec, now: float, requeued: bool) -> None: ...

    def recalc(self, now: float, pending: Sequence[tuple[int, JobSpec]]) -> dict[int, int]:
        """New priorities of the pending jobs (all of them, or only those that changed)."""
        ...


@dataclass
class _Queued:
    nice: int
    accrue: float
    """When the job began accruing age: its submission, or its requeue."""


class Multifactor:
    """priority/multifactor with Fair Tree over one partition and one QOS (each
    partition factor 1, QOS factor 0: a single-queue cluster)."""

    def __init__(
        self,
        cfg: MultifactorConfig,
        tree: Assoc,
        cluster: ClusterSize,
        history: Mapping[str, float] | None = None,
    ) -> None:
        self.cfg = cfg
        self.tree = tree
        self.cluster = cluster
        self.period = cfg.calc_period_s
        self.usage = UsageLedger(cfg, history)
        self._keys = {u.key for u in tree.users()}
        self.fairshare = fair_tree(tree, self.usage.raw).factors
        self._queued: dict[int, _Queued] = {}
        self.recalcs = 0

    def _key(self, job: JobSpec) -> str:
        key = user_key(job.account, job.user)
        if key not in self._keys:
            raise ValueError(f"job {job.name}: no association {key!r} in the tree")
        return key

    def factors(self, job: JobSpec, now: float, q: _Queued) -> JobFactors:
        return job_factors(
            self.cfg,
            waited_s=now - q.accrue,
            fairshare=self.fairshare[self._key(job)],
            nodes=1,
            cpus=-(-job.cpu_milli // MILLI),
            cluster=self.cluster,
            nice=q.nice,
        )

    def submitted(self, jid: int, job: JobSpec, now: float) -> int:
        q = _Queued(nice=-job.priority, accrue=now)
        self._queued[jid] = q
        return self.factors(job, now, q).priority

    def started(self, jid: int, job: JobSpec, now: float) -> None:
        self.usage.started(jid, self._key(job), billing(job, self.cfg), now)

    def stopped(self, jid: int, job: JobSpec, now: float, requeued: bool) -> None:
        self.usage.stopped(jid, now)
        if requeued:  # pending again: it accrues age from now
            self._queued[jid].accrue = now

    def recalc(self, now: float, pending: Sequence[tuple[int, JobSpec]]) -> dict[int, int]:
        """The decay thread's pass: charge and decay usage, recompute fair-share, then
        every pending job's priority."""
        self.recalcs += 1
        self.usage.run(now)
        self.fairshare = fair_tree(self.tree, self.usage.raw).factors
        return {jid: self.factors(job, now, self._queued[jid]).priority for jid, job in pending}
