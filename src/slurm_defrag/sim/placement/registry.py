"""Policy names and their builders."""

from __future__ import annotations

from collections.abc import Callable

from slurm_defrag.sim.placement.base import PlacementPolicy, PolicyContext
from slurm_defrag.sim.placement.best_fit import BestFit
from slurm_defrag.sim.placement.dot_product import DotProduct
from slurm_defrag.sim.placement.fgd import Fgd
from slurm_defrag.sim.placement.first_fit import FirstFit
from slurm_defrag.sim.placement.packing import Packing
from slurm_defrag.sim.placement.random_fit import RandomFit
from slurm_defrag.sim.placement.slurm_select import SlurmSelect

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
