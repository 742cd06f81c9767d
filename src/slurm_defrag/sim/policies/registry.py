"""Policy names and their builders."""

from __future__ import annotations

from collections.abc import Callable

from slurm_defrag.sim.policies.base import PlacementPolicy, PolicyContext
from slurm_defrag.sim.policies.best_fit import BestFit
from slurm_defrag.sim.policies.dot_product import DotProduct
from slurm_defrag.sim.policies.fgd import Fgd
from slurm_defrag.sim.policies.first_fit import FirstFit
from slurm_defrag.sim.policies.packing import Packing
from slurm_defrag.sim.policies.random_fit import RandomFit
from slurm_defrag.sim.policies.slurm_select import SlurmSelect

POLICIES: dict[str, Callable[[PolicyContext], PlacementPolicy]] = {
    "random": RandomFit,
    "first-fit": FirstFit,
    "best-fit": BestFit,
    "dot-product": DotProduct,
    "fgd": Fgd,
    "packing": Packing,
    "slurm": SlurmSelect,
}
"""Every policy, by the name used on the command line and in results."""

BASELINES = ("random", "dot-product", "best-fit", "fgd")
"""The four schedulers whose figures the FGD paper publishes for openb."""


def build(name: str, ctx: PolicyContext) -> PlacementPolicy:
    try:
        factory = POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose from {', '.join(POLICIES)}") from None
    return factory(ctx)
