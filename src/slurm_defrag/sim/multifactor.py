"""priority/multifactor: a pending job's priority as slurmctld computes it, factor by factor.

Written from ``src/plugins/priority/multifactor/priority_multifactor.c``
(``set_priority_factors``, ``_get_priority_internal``) and ``src/sprio/print.c``:

* age = time since the job began accruing (submit, or requeue) / ``PriorityMaxAge``,
  at most 1;
* fair-share = the association's Fair Tree factor (:mod:`slurm_defrag.sim.fair_tree`);
* job size, ``PriorityFavorSmall=NO``: (nodes / cluster nodes + CPUs / cluster CPUs) / 2;
  ``YES``: ((cluster nodes - nodes) / cluster nodes + (cluster CPUs - CPUs) / cluster CPUs)
  / 2 (a pending job's CPUs are the ones it asked for);
* partition = the partition's ``PriorityJobFactor`` / the largest of any partition;
* QOS = the QOS ``Priority`` / the largest of any QOS;
* each factor times its ``PriorityWeight*``; the site factor is added as is, the nice
  subtracted; below 1 the sum is 1 (0 means held), and the job's priority is the sum cut
  to an integer (``(uint32_t)``). sprio prints each weighted factor with ``%.0f``.

The nice job_submit.lua's ``short_first`` sets is capped by the range these weights give
(:meth:`MultifactorConfig.priority_range`, the computation ``plugins render`` runs on a
site's slurm.conf): at most 10 % of it by default, so fair-share keeps the rest.

Not modelled (weight 0 in every configuration here): ``PriorityWeightTRES``,
``PriorityWeightAssoc``, ``PriorityFlags`` other than the defaults (``SMALL_RELATIVE_TO_TIME``,
``NO_NORMAL_*``, ``MAX_TRES``, ``INCR_ONLY``, ``ACCRUE_ALWAYS``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from slurm_defrag.packing.queue_order import MULTIFACTOR, PriorityRange, read_range

DAY = 86400.0


@dataclass(frozen=True)
class MultifactorConfig:
    """The slurm.conf settings of priority/multifactor (their names, in seconds)."""

    weight_age: int = 0
    weight_fairshare: int = 0
    weight_jobsize: int = 0
    weight_partition: int = 0
    weight_qos: int = 0
    max_age_s: float = 7 * DAY
    """``PriorityMaxAge`` (Slurm's default 7-0)."""
    decay_half_life_s: float = 7 * DAY
    """``PriorityDecayHalfLife`` (default 7-0); 0: no decay."""
    calc_period_s: float = 300.0
    """``PriorityCalcPeriod`` (default 5 minutes): how often usage is charged and decayed,
    fair-share recomputed and every pending job's priority recalculated."""
    favor_small: bool = False
    """``PriorityFavorSmall``."""
    billing_cpu: float = 1.0
    """``TRESBillingWeights`` ``CPU=`` (Slurm bills CPUs when none are set)."""
    billing_gpu: float = 0.0
    """``TRESBillingWeights`` ``GRES/gpu=``; a shared GPU is billed its share."""
    charge_at_end: bool = True
    """``AccountingStorageEnforce`` holds ``limits`` (or ``safe``, which implies it): a job's
    last stretch is charged when it ends. Without it slurmctld charges usage only in the
    decay thread's passes over running jobs (acct_policy.c calls priority_g_job_end for
    ACCOUNTING_ENFORCE_LIMITS alone): what a job ran since the last pass is never charged,
    and a job shorter than ``PriorityCalcPeriod`` may cost nothing. Found live: 5-second
    jobs left no usage on the compose cluster (``associations,qos``)."""

    def __post_init__(self) -> None:
        weights = (
            self.weight_age,
            self.weight_fairshare,
            self.weight_jobsize,
            self.weight_partition,
            self.weight_qos,
        )
        if min(weights) < 0:
            raise ValueError("PriorityWeight* must be 0 or more")
        if self.max_age_s <= 0 or self.calc_period_s <= 0 or self.decay_half_life_s < 0:
            raise ValueError("PriorityMaxAge and PriorityCalcPeriod must be positive")

    @property
    def weight_sum(self) -> int:
        """The site's priority range: the most the weighted factors can add up to."""
        return (
            self.weight_age
            + self.weight_fairshare
            + self.weight_jobsize
            + self.weight_partition
            + self.weight_qos
        )

    def priority_range(self) -> PriorityRange:
        """These weights as ``plugins render`` reads a site's
        (:func:`~slurm_defrag.packing.queue_order.read_range`): what job_submit.lua's
        queue-order boost is capped by, the same way on both sides."""
        return read_range(
            {
                "PriorityType": MULTIFACTOR,
                "PriorityWeightAge": self.weight_age,
                "PriorityWeightFairShare": self.weight_fairshare,
                "PriorityWeightJobSize": self.weight_jobsize,
                "PriorityWeightPartition": self.weight_partition,
                "PriorityWeightQOS": self.weight_qos,
            },
            "the simulated site",
        )


@dataclass(frozen=True)
class JobFactors:
    """One pending job's weighted factors (sprio's columns, before printing)."""

    age: float = 0.0
    fairshare: float = 0.0
    jobsize: float = 0.0
    partition: float = 0.0
    qos: float = 0.0
    site: float = 0.0
    nice: int = 0

    @property
    def priority(self) -> int:
        """The job's priority: the sum less the nice, at least 1, cut to an integer."""
        total = (
            self.site + self.age + self.fairshare + self.jobsize + self.partition + self.qos
        ) - self.nice
        return int(max(1.0, total))

    def printed(self) -> dict[str, int]:
        """What sprio prints for each factor (``%.0f``, ties to even) and the priority."""
        return {
            "site": round(self.site),
            "age": round(self.age),
            "fairshare": round(self.fairshare),
            "jobsize": round(self.jobsize),
            "partition": round(self.partition),
            "qos": round(self.qos),
            "nice": self.nice,
            "priority": self.priority,
        }


@dataclass(frozen=True)
class ClusterSize:
    """What the job-size factor divides by: ``node_record_count`` and ``cluster_cpus``."""

    nodes: int
    cpus: int


def age_factor(cfg: MultifactorConfig, waited_s: float) -> float:
    """Time accrued over ``PriorityMaxAge``, at most 1 (0 before accruing)."""
    if waited_s <= 0:
        return 0.0
    return 1.0 if waited_s >= cfg.max_age_s else waited_s / cfg.max_age_s


def jobsize_factor(cfg: MultifactorConfig, nodes: int, cpus: int, cluster: ClusterSize) -> float:
    """The job-size factor of a job asking for ``nodes`` nodes and ``cpus`` CPUs."""
    if cfg.favor_small:
        f = (cluster.nodes - nodes) / cluster.nodes
        if cpus:
            f = (f + (cluster.cpus - cpus) / cluster.cpus) / 2
    else:
        f = nodes / cluster.nodes
        if cpus:
            f = (f + cpus / cluster.cpus) / 2
    return min(1.0, max(0.0, f))


def job_factors(
    cfg: MultifactorConfig,
    *,
    waited_s: float,
    fairshare: float,
    nodes: int,
    cpus: int,
    cluster: ClusterSize,
    partition_norm: float = 1.0,
    qos_norm: float = 0.0,
    nice: int = 0,
    site: float = 0.0,
) -> JobFactors:
    """A pending job's weighted factors. ``waited_s``: seconds since it began accruing;
    ``fairshare``: its association's factor; ``partition_norm`` / ``qos_norm``: its
    partition's ``PriorityJobFactor`` / its QOS ``Priority`` over the largest one."""
    return JobFactors(
        age=age_factor(cfg, waited_s) * cfg.weight_age,
        fairshare=fairshare * cfg.weight_fairshare,
        jobsize=jobsize_factor(cfg, nodes, cpus, cluster) * cfg.weight_jobsize,
        partition=partition_norm * cfg.weight_partition,
        qos=qos_norm * cfg.weight_qos,
        site=site,
        nice=nice,
    )


def decay_per_second(cfg: MultifactorConfig) -> float:
    """slurmctld's per-second decay factor, ``1 - 0.693 / PriorityDecayHalfLife`` (its
    first-order approximation of 2^(-1/half-life), used as is); 1 without decay."""
    return 1.0 - 0.693 / cfg.decay_half_life_s if cfg.decay_half_life_s > 0 else 1.0


def steady_usage(rate: float, cfg: MultifactorConfig) -> float:
    """The decayed usage of a constant ``rate`` (billing x seconds per second) charged for
    ever: sum of rate x d^t over all past t = rate / -ln d (unbounded without decay)."""
    d = decay_per_second(cfg)
    return math.inf if d >= 1.0 else rate / -math.log(d)
