"""What one simulated configuration is: a placement and a defrag step, typed.

:func:`from_profile` turns a profile (:mod:`slurm_defrag.sim.profile`) into them: the
``[placement]`` and ``[job_submit]`` tables into a :class:`~slurm_defrag.sim.levers.
SlurmMode` (Slurm's selection with a lever and the queue order), the ``[defrag]`` table
into a registered step's :class:`~slurm_defrag.sim.defrag_steps.PlannerParams`. A plain
placement policy (``--policies first-fit``) or step (``--defrag planner``) is a name
looked up in its registry, never a string taken apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from slurm_defrag.errors import InputError
from slurm_defrag.packing.fit_classes import Mix, TaskClass
from slurm_defrag.packing.node_levers import LeverSettings
from slurm_defrag.sim.defrag_steps import StepLimits
from slurm_defrag.sim.levers import (
    CPU_BUCKETS,
    SHORT_FIRST_LARGE_GPUS,
    SHORT_FIRST_SHARE,
    SlurmMode,
)
from slurm_defrag.sim.placement.names import SLURM
from slurm_defrag.sim.placement.registry import POLICIES
from slurm_defrag.sim.profile import (
    PROFILE_VERSION,
    JobSubmitTable,
    PlacementTable,
    Profile,
    load_profile,
    parse_profile,
)

_PLACEHOLDER_MIX = Mix((TaskClass(1, 1, 1000, 1.0),))
"""An ``fgd-*`` lever's mix until :func:`~slurm_defrag.sim.levers.with_mix` sets the run's."""


@dataclass(frozen=True)
class PlacementConfig:
    """Where jobs start: a placement policy, and under Slurm's own selection its mode."""

    name: str
    """The label in results."""
    policy: str
    """A registered placement policy (:data:`~slurm_defrag.sim.placement.names.PLACEMENTS`)."""
    mode: SlurmMode | None = None
    """``policy = "slurm"``: the lever and queue order; None for the other policies."""


@dataclass(frozen=True)
class RunConfig:
    """One configuration of a grid: where jobs start and which defrag step runs."""

    placement: PlacementConfig
    step: str = "none"
    limits: StepLimits = field(default_factory=StepLimits)
    source: dict[str, object] = field(default_factory=dict, compare=False)
    """The profile it came from, as written in the results (empty for plain names)."""


def plain(policy: str) -> PlacementConfig:
    """A placement policy by its registered name alone (``slurm``: Slurm with no lever)."""
    if policy not in POLICIES:  # the registry: a bench script may register its own
        raise InputError(f"unknown placement policy {policy!r}; choose from {', '.join(POLICIES)}")
    mode = SlurmMode(LeverSettings("none")) if policy == SLURM else None
    return PlacementConfig(policy, policy, mode)


def from_profile(profile: Profile) -> RunConfig:
    """The configuration a profile names; :class:`InputError` (naming the profile and the
    field) for what the simulator does not model."""
    name = profile.label
    try:
        mode = slurm_mode(profile.placement, profile.job_submit)
    except ValueError as e:
        raise InputError(f"{name}: {e}") from None
    placement = PlacementConfig(name, profile.placement.policy, mode)
    source = profile.model_dump(mode="json", exclude={"version", "name"})
    source["defrag"].pop("policy", None)  # a path: where the file was, not what it says
    return RunConfig(placement, profile.defrag.step, profile.defrag.limits, source)


def slurm_mode(placement: PlacementTable, queue: JobSubmitTable) -> SlurmMode | None:
    """The :class:`SlurmMode` of a profile's placement and queue order; None when the
    policy is not Slurm's own. ValueError, naming the field, for a queue order the
    simulator does not model (it models ``--short-first 0.1``, with ``--large-first 4``
    under ``--short-first-all``)."""
    if placement.policy != SLURM:
        if queue != JobSubmitTable():
            raise ValueError(f'job_submit: a queue order needs policy = "{SLURM}"')
        return None
    lever = placement.lever
    settings = LeverSettings(
        lever,
        mix=_PLACEHOLDER_MIX if lever.startswith("fgd-") else None,
        min_members=placement.min_members,
        cpu_buckets=CPU_BUCKETS if placement.cpu_aware else (),
    )
    return SlurmMode(
        settings,
        placement.lever_every,
        seen_mix=placement.mix != "trace",
        warm=placement.mix == "warm",
        short_first=_queue_order(queue),
        keep=queue.keep_scarce,
        boost_cap=queue.boost_cap,
        uncapped=queue.uncapped_boost,
    )


def _queue_order(queue: JobSubmitTable) -> str | None:
    if queue.short_first is None:
        return None
    if queue.short_first != SHORT_FIRST_SHARE:
        raise ValueError(f"job_submit.short_first: the simulator models {SHORT_FIRST_SHARE} only")
    if not queue.short_first_all:
        if queue.large_first is not None:
            raise ValueError("job_submit.large_first: the simulator models it with short_first_all")
        return "scarce"
    if queue.large_first != SHORT_FIRST_LARGE_GPUS:
        raise ValueError(
            f"job_submit.large_first: with short_first_all the simulator models "
            f"{SHORT_FIRST_LARGE_GPUS} (Protocol B's large jobs)"
        )
    return "all"


def configure(name: str = "profile", **tables: Mapping[str, object]) -> RunConfig:
    """The configuration of a profile written in code, its tables as keyword arguments
    (``configure(placement={"lever": "shape-weights"}, job_submit={"short_first": 0.1})``):
    for tests and bench scripts; checked as a profile file is."""
    return from_profile(parse_profile({"version": PROFILE_VERSION, "name": name, **tables}))


def placements(names: Sequence[str], profiles: Sequence[Path] = ()) -> list[PlacementConfig]:
    """The placements of registered policies by name, then of profile files (bench
    scripts that run placements without a defrag step)."""
    return [plain(n) for n in names] + [from_profile(load_profile(p)).placement for p in profiles]
