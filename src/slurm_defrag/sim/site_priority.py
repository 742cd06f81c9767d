"""The priority policies Protocol B can run, by name, and the model built for one run.

* ``none``: no priority model, the simulator before issue #41 (every job equal unless
  job_submit.lua boosts it, then first come first served);
* ``site``: priority/multifactor as a GPU site would configure it, fair-share dominant:

  .. code-block:: text

      PriorityType=priority/multifactor          # Fair Tree, the default
      PriorityWeightFairshare=10000
      PriorityWeightAge=1000
      PriorityWeightJobSize=1000
      PriorityWeightPartition=1000
      PriorityWeightQOS=0
      PriorityMaxAge=14-0
      PriorityDecayHalfLife=14-0
      PriorityCalcPeriod=5
      PriorityFavorSmall=NO
      TRESBillingWeights=CPU=1.0,GRES/gpu=12.0
      AccountingStorageEnforce=associations,limits,qos

  the weights and the 14-day decay and age of the configuration example in Slurm's
  multifactor documentation (slurm.schedmd.com/priority_multifactor.html), the fair-share
  weight of the issue's live probe (10,000), the calculation period Slurm defaults to,
  and GPUs billed as the CPUs they come with (12 per GPU, openb's 96-CPU 8-GPU nodes);
  ``limits`` enforced, as a site with QOS limits has it, so a job's usage is charged in
  full when it ends (:attr:`MultifactorConfig.charge_at_end`).
  One partition and one QOS: the partition factor is the same for every job and the QOS
  factor 0. Users and accounts: :mod:`slurm_defrag.sim.population`.

job_submit.lua's queue-order boost (a profile's ``[job_submit] short_first``) is capped
under a priority model as ``plugins render`` caps it on a site
(:func:`slurm_defrag.sim.levers.boost_cap`): 10 % of the range by default, 1,300 points
under ``site`` (fair-share alone is worth up to 10,000); ``boost_cap`` another share,
``uncapped_boost`` the raw boost (up to 30,240). ``none`` has no range: there the raw
boost stands, as before #41.

The cluster does not start empty-handed: each user's usage starts at what a site in steady
state would hold, the decayed sum of that user's share of the work the cluster serves
(the offered load, at most the capacity) charged for ever (:func:`history`). Without it
every user would start tied and the first hours would be decided by who came first.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from slurm_defrag.domain.units import MILLI
from slurm_defrag.errors import InputError
from slurm_defrag.sim.model import JobSpec, NodeSpec
from slurm_defrag.sim.multifactor import DAY, ClusterSize, MultifactorConfig, steady_usage
from slurm_defrag.sim.population import Population
from slurm_defrag.sim.priority import Multifactor
from slurm_defrag.sim.usage import billing

NO_PRIORITY = "none"
PRESETS: dict[str, MultifactorConfig] = {
    "site": MultifactorConfig(
        weight_age=1000,
        weight_fairshare=10000,
        weight_jobsize=1000,
        weight_partition=1000,
        weight_qos=0,
        max_age_s=14 * DAY,
        decay_half_life_s=14 * DAY,
        calc_period_s=300.0,
        favor_small=False,
        billing_cpu=1.0,
        billing_gpu=12.0,
    ),
}
POPULATION = Population()


def preset(name: str) -> MultifactorConfig | None:
    """The configuration a priority name asks for (None: no priority model)."""
    if name == NO_PRIORITY:
        return None
    if name not in PRESETS:
        raise InputError(
            f"priority {name!r}: choose from {', '.join([NO_PRIORITY, *sorted(PRESETS)])}"
        )
    return PRESETS[name]


def cluster_size(nodes: Sequence[NodeSpec]) -> ClusterSize:
    """``node_record_count`` and ``cluster_cpus`` (whole CPUs) of the simulated cluster."""
    return ClusterSize(len(nodes), sum(n.cpu_milli // MILLI for n in nodes))


def history(
    cfg: MultifactorConfig,
    population: Population,
    pool: Sequence[JobSpec],
    rate: float,
    served_share: float,
) -> dict[str, float]:
    """Steady-state usage per user: ``served_share`` of the billing the arrivals offer
    (``rate`` jobs per second drawn from ``pool``), split by the users' probabilities."""
    per_job = float(np.mean([billing(j, cfg) * j.duration for j in pool]))
    total = per_job * rate * served_share
    return {
        k: steady_usage(p * total, cfg)
        for k, p in zip(population.keys(), population.weights(), strict=True)
    }


def multifactor(
    cfg: MultifactorConfig,
    nodes: Sequence[NodeSpec],
    pool: Sequence[JobSpec],
    rate: float,
    load: float,
    population: Population = POPULATION,
) -> Multifactor:
    """The priority model of one Protocol B run."""
    served = min(1.0, 1.0 / load) if load > 0 else 1.0
    return Multifactor(
        cfg,
        population.tree(),
        cluster_size(nodes),
        history(cfg, population, pool, rate, served),
    )
