"""``serve --profile FILE``: the service's lever and policy file from a profile.

A profile's ``[placement] lever`` is the service's ``packing_lever`` (``none``: packing
off) and its ``[defrag] policy`` the service's ``policy`` file (:mod:`slurm_defrag.sim.
profile`): the configuration the simulator measured is the one the service runs. They
override the settings file and the environment, as command-line options do.
"""

from __future__ import annotations

from pathlib import Path
from typing import get_args

from slurm_defrag.errors import InputError


def service_overrides(profile: Path | None) -> dict[str, object]:
    """The settings a profile sets (none without one); :class:`InputError` naming the
    field the service cannot run."""
    if profile is None:
        return {}
    from slurm_defrag.service.settings import ServiceSettings
    from slurm_defrag.sim.placement.names import SLURM
    from slurm_defrag.sim.profile import load_profile

    p = load_profile(profile)
    if p.placement.policy != SLURM:
        raise InputError(
            f"{profile}: placement.policy: the service acts on Slurm's own selection "
            f'(policy = "{SLURM}"), not {p.placement.policy!r}'
        )
    out: dict[str, object] = {}
    lever = p.placement.lever
    runnable = get_args(ServiceSettings.model_fields["packing_lever"].annotation)
    if lever == "none":
        out["packing"] = False
    elif lever in runnable:
        out["packing"], out["packing_lever"] = True, lever
    else:
        raise InputError(
            f"{profile}: placement.lever: the service runs {', '.join(runnable)} or none; "
            f"{lever!r} is the simulator's only"
        )
    if p.defrag.policy is not None:
        out["policy"] = p.defrag.policy
    return out
