"""Who submits the trace's jobs: users in accounts, drawn with a seed.

openb has no users, and fair-share needs them. The assignment is a model, stated here and
in docs/benchmarks.md ("Users and accounts"):

* ``users`` users in ``accounts`` accounts, every association with one share (sacctmgr's
  default ``Fairshare=1``): the accounts split the cluster equally, and so do the users
  of one account;
* a job's user is drawn independently of the job, with probability proportional to
  1 / rank^``zipf_s`` (rank 1 the heaviest): a few users submit most of the work, the
  skew reported for shared GPU clusters (Jeon et al., "Analysis of Large-Scale
  Multi-Tenant GPU Clusters for DNN Training Workloads", USENIX ATC '19; Hu et al.,
  "Characterization and Prediction of Deep Learning Workloads in Large-Scale GPU
  Datacenters", SC '21) and the Zipf-like jobs per user of parallel workloads
  (Feitelson, "Workload Modeling for Computer Systems Performance Evaluation", 2015);
* the user of rank r sits in account r mod ``accounts``, so every account has heavy and
  light users and the first account the heaviest of each round;
* nothing else depends on the user: a user's jobs are a random sample of the trace's.

The draw comes from its own seeded stream, so the arrivals are the same with or without
users.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from slurm_defrag.sim.fair_tree import Assoc, user_key
from slurm_defrag.sim.model import JobSpec


@dataclass(frozen=True)
class Population:
    users: int = 40
    accounts: int = 4
    zipf_s: float = 1.0

    def __post_init__(self) -> None:
        if self.users < 1 or not 1 <= self.accounts <= self.users or self.zipf_s < 0:
            raise ValueError("a population needs users >= accounts >= 1 and zipf_s >= 0")

    def user(self, rank: int) -> str:
        """The name of the user of ``rank`` (0: the heaviest)."""
        return f"u{rank:02d}"

    def account(self, rank: int) -> str:
        return f"a{rank % self.accounts}"

    def weights(self) -> list[float]:
        """Probability that a job is the user's of each rank (Zipf, sums to 1)."""
        w = [1.0 / (r + 1) ** self.zipf_s for r in range(self.users)]
        total = sum(w)
        return [x / total for x in w]

    def tree(self) -> Assoc:
        """The cluster's association tree: root, the accounts, their users."""
        accounts = [
            Assoc(
                f"a{a}",
                children=tuple(
                    Assoc(user_key(f"a{a}", self.user(r)), user=True)
                    for r in range(a, self.users, self.accounts)
                ),
            )
            for a in range(self.accounts)
        ]
        return Assoc("root", children=tuple(accounts))

    def keys(self) -> list[str]:
        """Usage keys of the users by rank."""
        return [user_key(self.account(r), self.user(r)) for r in range(self.users)]


def with_owners(
    jobs: Sequence[JobSpec], population: Population, rng: np.random.Generator
) -> list[JobSpec]:
    """``jobs`` with a user and account each, drawn from ``population`` by ``rng``."""
    ranks = rng.choice(population.users, size=len(jobs), p=population.weights())
    return [
        replace(j, user=population.user(int(r)), account=population.account(int(r)))
        for j, r in zip(jobs, ranks, strict=True)
    ]
