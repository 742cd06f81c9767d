"""``plugins render --profile FILE``: job_submit.lua's queue order from a profile.

The profile's ``[job_submit]`` table holds ``render``'s options of the same names
(:mod:`slurm_defrag.sim.profile`), so the table a site renders is the one the simulator
measured. The options are taken from the profile or from the command line, not both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from slurm_defrag.errors import InputError
from slurm_defrag.packing.queue_order import DEFAULT_CAP_SHARE


@dataclass(frozen=True)
class QueueOptions:
    """``render``'s queue-order options."""

    short_first: float | None = None
    short_first_all: bool = False
    large_first: int | None = None
    keep_scarce: float | None = None
    boost_cap: float = DEFAULT_CAP_SHARE


def queue_options(given: QueueOptions, profile: Path | None) -> QueueOptions:
    """The options ``render`` writes: ``given`` (the command line), or the profile's when
    one is named; :class:`InputError` when both set them or the profile cannot be
    rendered."""
    if profile is None:
        return given
    from slurm_defrag.sim.profile import load_profile

    if given != QueueOptions():
        raise InputError(
            "--profile: it sets the queue order; leave out --short-first, --short-first-all, "
            "--large-first, --keep-scarce and --boost-cap"
        )
    queue = load_profile(profile).job_submit
    if queue.uncapped_boost:
        raise InputError(
            f"{profile}: job_submit.uncapped_boost is the simulator's raw boost; render "
            "always caps it (give boost_cap instead)"
        )
    return QueueOptions(
        short_first=queue.short_first,
        short_first_all=queue.short_first_all,
        large_first=queue.large_first,
        keep_scarce=queue.keep_scarce,
        boost_cap=DEFAULT_CAP_SHARE if queue.boost_cap is None else queue.boost_cap,
    )
