"""The profile file: one TOML naming a whole configuration, read by ``plugins render
--profile``, ``serve --profile`` and ``simulate --profile`` alike (issue #43).

::

    version = 1
    name = "one-configuration"      # the label in results (default: the file's stem)

    [placement]                     # where jobs start
    policy = "slurm"                # Slurm's own selection (or a baseline: first-fit, ...)
    lever = "shape-weights"         # the service's packing_lever

    [job_submit]                    # job_submit.lua's queue order (plugins render's options)
    short_first = 0.1
    short_first_all = true
    large_first = 4
    keep_scarce = 0.5

    [defrag]                        # the planner
    step = "planner-gain"           # the simulator's step (sim/defrag_steps.py)
    max_lost_gpu_hours = 4          # its limits
    max_hold_hours = 0.5
    policy = "../policy-large-jobs.toml"   # the service's policy file (relative to this one)

Every field is typed (pydantic); a bad profile is one :class:`InputError` line naming the
file and each bad field, as the policy file's are. This module imports nothing heavy: the
service and ``plugins render`` read profiles without loading the simulator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from slurm_defrag.config_files import NonEmptyPath, one_line, parse_toml, read_text
from slurm_defrag.errors import InputError
from slurm_defrag.packing.node_levers import LEVERS
from slurm_defrag.sim.defrag_steps import LIMITED, STEPS, StepLimits
from slurm_defrag.sim.placement.names import PLACEMENTS, SLURM

PROFILE_VERSION = 1


class _Table(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PlacementTable(_Table):
    """``[placement]``: the placement policy and, under Slurm's own, the packing lever."""

    policy: str = SLURM
    """A placement policy (:data:`~slurm_defrag.sim.placement.names.PLACEMENTS`)."""
    lever: str = "none"
    """The packing lever (:data:`~slurm_defrag.packing.node_levers.LEVERS`); the
    service's ``packing_lever``. Needs ``policy = "slurm"``."""
    lever_every: int = Field(default=1, ge=1)
    """Protocol A (no clock): the lever is applied before every N-th arrival."""
    min_members: int = Field(default=1, ge=1)
    """Feature levers: each class's feature on at least this many nodes."""
    cpu_aware: bool = False
    """Feature levers: classes split by CPUs per node (powers of two)."""
    mix: Literal["trace", "seen", "warm"] = "trace"
    """``fgd-*`` levers: the workload mix they weigh by: the whole trace's, the jobs seen
    so far (as the service estimates it), or that estimate full from the start."""

    @model_validator(mode="after")
    def _consistent(self) -> PlacementTable:
        if self.policy not in PLACEMENTS:
            raise ValueError(
                f"policy: unknown {self.policy!r}; choose from {', '.join(PLACEMENTS)}"
            )
        if self.lever not in LEVERS:
            raise ValueError(f"lever: unknown {self.lever!r}; choose from {', '.join(LEVERS)}")
        lever_set = (self.lever, self.lever_every, self.min_members, self.cpu_aware, self.mix)
        if self.policy != SLURM and lever_set != ("none", 1, 1, False, "trace"):
            raise ValueError(f'lever: levers act on Slurm\'s selection (policy = "{SLURM}")')
        if self.mix != "trace" and not self.lever.startswith("fgd-"):
            raise ValueError(f"mix: {self.mix!r} needs an fgd-* lever (a mix to weigh)")
        return self


class JobSubmitTable(_Table):
    """``[job_submit]``: the queue order job_submit.lua applies, ``plugins render``'s
    options of the same names (``--short-first``, ``--short-first-all``, ...)."""

    short_first: float | None = Field(default=None, gt=0, le=1)
    """Scarce jobs first: those at most this share of the GPU nodes can hold."""
    short_first_all: bool = False
    """Every job by its time limit, shortest first."""
    large_first: int | None = Field(default=None, ge=1)
    """Jobs of at least this many GPUs per node before smaller ones."""
    keep_scarce: float | None = Field(default=None, ge=0, le=1)
    """The scarce node types kept for the jobs only they hold while those ask for at least
    this share of their time (0: always)."""
    boost_cap: float | None = Field(default=None, gt=0, le=1)
    """The boost at most this share of the priority range (default: render's 0.1)."""
    uncapped_boost: bool = False
    """The simulator only: the raw boost, as job_submit.lua set it before the cap."""

    @model_validator(mode="after")
    def _consistent(self) -> JobSubmitTable:
        if self.short_first is None:
            for key in ("short_first_all", "large_first", "keep_scarce", "boost_cap"):
                if getattr(self, key) not in (None, False):
                    raise ValueError(f"{key}: needs short_first (the queue order)")
            if self.uncapped_boost:
                raise ValueError("uncapped_boost: needs short_first (the queue order)")
        if self.uncapped_boost and self.boost_cap is not None:
            raise ValueError("boost_cap: give it or uncapped_boost, not both")
        return self


class DefragTable(_Table):
    """``[defrag]``: the planner, as the simulator runs it and the service's policy file."""

    step: str = "none"
    """A defrag step (:data:`~slurm_defrag.sim.defrag_steps.STEPS`)."""
    max_lost_gpu_hours: float | None = Field(default=None, ge=0)
    """At most this many GPU-hours of work lost per plan."""
    max_hold_hours: float | None = Field(default=None, ge=0)
    """Blocks held only for blockers ending within this many hours."""
    queue_head: int | None = Field(default=None, ge=1)
    """Targets only among the first this many jobs of the queue, whatever their size (the
    policy's ``free-nvlink-block`` ``queue_head``); none: anywhere in it."""
    policy: NonEmptyPath | None = None
    """The service's policy file (relative paths from the profile's folder)."""

    @model_validator(mode="after")
    def _consistent(self) -> DefragTable:
        if self.step not in STEPS:
            raise ValueError(f"step: unknown {self.step!r}; choose from {', '.join(STEPS)}")
        given = [
            k
            for k in ("max_lost_gpu_hours", "max_hold_hours", "queue_head")
            if getattr(self, k) is not None
        ]
        if given and self.step not in LIMITED:
            raise ValueError(
                f"{', '.join(given)}: step {self.step!r} takes no limits; "
                f"only {', '.join(LIMITED)} do"
            )
        return self

    @property
    def limits(self) -> StepLimits:
        return StepLimits(self.max_lost_gpu_hours, self.max_hold_hours, self.queue_head)


class Profile(_Table):
    """A whole profile file; every table is optional (defaults: Slurm's own selection with
    no lever, no queue order, no defrag)."""

    version: Literal[1]
    name: str | None = Field(default=None, min_length=1)
    """The label of its runs in results (default: the file's stem)."""
    placement: PlacementTable = Field(default_factory=PlacementTable)
    job_submit: JobSubmitTable = Field(default_factory=JobSubmitTable)
    defrag: DefragTable = Field(default_factory=DefragTable)

    @property
    def label(self) -> str:
        """Its name (the file's stem when the file names none)."""
        return self.name or "profile"


def _key(loc: Sequence[int | str]) -> str:
    parts = [str(p) for p in loc if p not in ("function-after", "function-before")]
    return ".".join(one_line(p) for p in parts) or "(top level)"


def _problems(exc: ValidationError) -> list[str]:
    out = []
    for err in exc.errors(include_url=False):
        msg = one_line(err["msg"].removeprefix("Value error, "))
        key = _key(err["loc"])
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "literal_error" and err["loc"] == ("version",):
            msg = f"this slurm-defrag reads version = {PROFILE_VERSION}"
        elif err["type"] == "value_error" and len(err["loc"]) == 1 and ": " in msg:
            field, _, msg = msg.partition(": ")  # a table's own check names its field
            key = f"{key}.{field}" if key != "(top level)" else field
        out.append(f"{key}: {msg}")
    return out


def parse_profile(data: Mapping[str, Any], source: Path | str = "<profile>") -> Profile:
    """Validate a parsed profile; :class:`InputError` lists every problem on one line."""
    if "version" not in data:
        raise InputError(f"{source}: version: required (add `version = {PROFILE_VERSION}`)")
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{source}: " + "; ".join(_problems(exc))) from None
    return profile.model_copy(update={"name": profile.name or Path(str(source)).stem})


def load_profile(path: Path) -> Profile:
    """Read a profile file; its name defaults to the file's stem and ``defrag.policy`` is
    resolved from the profile's folder."""
    data = parse_toml(read_text(path), path)
    profile = parse_profile(data, path)
    policy = profile.defrag.policy
    if policy is not None and not policy.is_absolute():
        defrag = profile.defrag.model_copy(update={"policy": path.parent / policy})
        profile = profile.model_copy(update={"defrag": defrag})
    return profile
