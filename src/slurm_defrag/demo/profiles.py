"""The demo's profiles: the policy and packing lever the service runs with.

* ``large-jobs`` (default): the configuration the simulator measured for issue #14's
  goals and the README recommends for enforce: ``examples/policy-large-jobs.toml`` (a
  byte-identical copy ships in the package, ``large-jobs.toml``: the demo needs no
  checkout) with the ``shape-weights`` packing lever, which needs no job_submit plugin.
  Only jobs of 4+ GPUs per node are targets; none of them is ever a victim.
* ``default``: what ``serve`` runs without a policy file: the built-in default policy,
  every falsely starved GPU job a target, no packing.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from slurm_defrag.errors import InputError


@dataclass(frozen=True)
class Profile:
    name: str
    summary: str
    policy_file: str | None
    """A file of this package (None: the built-in default policy)."""
    packing_lever: str | None
    """The service's ``packing_lever`` (None: packing off)."""

    def policy_path(self) -> AbstractContextManager[Path | None]:
        """The policy file as a path while the context is open (None: defaults)."""
        if self.policy_file is None:
            return nullcontext(None)
        return resources.as_file(resources.files(__package__).joinpath(self.policy_file))


PROFILES = {
    p.name: p
    for p in (
        Profile(
            "large-jobs",
            "examples/policy-large-jobs.toml + shape-weights: 4+ GPU jobs helped",
            "large-jobs.toml",
            "shape-weights",
        ),
        Profile(
            "default", "the built-in default policy, no packing (serve's defaults)", None, None
        ),
    )
}
DEFAULT = "large-jobs"


def profile(name: str) -> Profile:
    found = PROFILES.get(name)
    if found is None:
        raise InputError(f"--profile {name!r}: choose from {', '.join(PROFILES)}")
    return found
