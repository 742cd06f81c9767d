"""Decayed usage per user association, charged as slurmctld's decay thread charges it.

From ``_decay_thread``, ``_apply_decay`` and ``_apply_new_usage`` (priority_multifactor.c):
every ``PriorityCalcPeriod`` all usage is multiplied by d^(seconds since the last run),
``d = 1 - 0.693 / PriorityDecayHalfLife``; then each running job adds billing x Δ x d^Δ
for the Δ seconds it ran since the last run (or since it started); a job that ends (or is
requeued) adds its last Δ at once (``priority_p_job_end``) when the site enforces
``limits`` (:attr:`MultifactorConfig.charge_at_end`), else that stretch is never charged.
The usage of an account is the sum of its users'
(:func:`slurm_defrag.sim.fair_tree.usage_totals`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from slurm_defrag.domain.units import MILLI
from slurm_defrag.sim.model import JobSpec
from slurm_defrag.sim.multifactor import MultifactorConfig, decay_per_second


def billing(job: JobSpec, cfg: MultifactorConfig) -> float:
    """The job's billing TRES: whole CPUs (as Slurm allocates them) and GPUs (a shared
    GPU its share, as a shard weight would bill it), each by its ``TRESBillingWeights``."""
    cpus = -(-job.cpu_milli // MILLI)
    return cfg.billing_cpu * cpus + cfg.billing_gpu * job.total_milli / MILLI


@dataclass
class _Running:
    key: str
    start: float
    billing: float


class UsageLedger:
    """Raw usage of every user association, and the jobs running against it."""

    def __init__(self, cfg: MultifactorConfig, history: Mapping[str, float] | None = None):
        self._d = decay_per_second(cfg)
        self._charge_at_end = cfg.charge_at_end
        self.raw: dict[str, float] = dict(history or {})
        self.last_ran = 0.0
        """When the decay thread last ran (g_last_ran)."""
        self._running: dict[int, _Running] = {}

    def _charge(self, r: _Running, until: float) -> None:
        delta = until - max(self.last_ran, r.start)
        if delta > 0:
            self.raw[r.key] = self.raw.get(r.key, 0.0) + r.billing * delta * self._d**delta

    def started(self, jid: int, key: str, bill: float, now: float) -> None:
        self._running[jid] = _Running(key, now, bill)

    def stopped(self, jid: int, now: float) -> None:
        """The job ended or was requeued: its last stretch is charged now, where the site
        enforces ``limits``; elsewhere it is lost."""
        r = self._running.pop(jid, None)
        if r is not None and self._charge_at_end:
            self._charge(r, now)

    def run(self, now: float) -> None:
        """One pass of the decay thread: decay everything, then charge the running jobs."""
        if now <= self.last_ran:
            return
        factor = self._d ** (now - self.last_ran)
        if factor != 1.0:
            for k in self.raw:
                self.raw[k] *= factor
        for r in self._running.values():
            self._charge(r, now)
        self.last_ran = now
