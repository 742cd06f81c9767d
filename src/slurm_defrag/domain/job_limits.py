"""The nodes a pending job's own ``-w``, ``-x`` and ``--constraint`` let it use.

A block freed on a node the job may not use is a requeue for nothing and a hold nobody
else gets. These limits are what the job's owner typed: a limit that cannot be read
(a malformed or oversized host list, a constraint with counts, brackets, parentheses,
``!`` or both ``&`` and ``|``, which are not modelled) makes the job no target, never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slurm_defrag.domain.cluster import Job, Node
from slurm_defrag.domain.hostlists import expand_user_hosts

_FEATURE = re.compile(r"[A-Za-z0-9_.:+@/=-]+")
_SHOWN = 60  # characters of a user's text quoted in a reason


@dataclass(frozen=True, slots=True)
class JobLimits:
    required: frozenset[str] | None = None
    """``-w`` names (None: any node)."""
    excluded: frozenset[str] = frozenset()
    any_of: bool = False
    """The constraint's features are joined by ``|`` (else every one is needed)."""
    features: frozenset[str] = frozenset()
    unreadable: str = ""
    """Why the limits cannot be read: the job is then no target."""

    def admits(self, node: Node) -> bool:
        if self.unreadable:
            return False
        if self.required is not None and node.name not in self.required:
            return False
        if node.name in self.excluded:
            return False
        if not self.features:
            return True
        have = frozenset(node.features)
        return not self.features.isdisjoint(have) if self.any_of else self.features <= have


NO_LIMITS = JobLimits()


def job_limits(job: Job, nodes: int) -> JobLimits:
    """The limits of ``job``, a target of ``nodes`` nodes."""
    if not (job.required_nodes or job.excluded_nodes or job.constraint):
        return NO_LIMITS
    try:
        required = _hosts(job.required_nodes, "-w") if job.required_nodes else None
        excluded = _hosts(job.excluded_nodes, "-x") if job.excluded_nodes else frozenset()
        any_of, features = _constraint(job.constraint)
    except ValueError as exc:
        return JobLimits(unreadable=str(exc))
    if required is not None and len(required) != nodes:
        # Slurm gives the job every -w node: fewer than it needs means these *and* others,
        # more means its node count is out of date; neither is a choice of `nodes` nodes.
        return JobLimits(
            unreadable=f"-w names {_nodes(len(required))}, the job needs {nodes} (not modelled)"
        )
    return JobLimits(required, excluded, any_of, features)


def _hosts(text: str, flag: str) -> frozenset[str]:
    try:
        return frozenset(expand_user_hosts(text))
    except ValueError as exc:
        raise ValueError(f"{flag} {_quote(text)} unreadable: {exc}") from None


def _constraint(text: str) -> tuple[bool, frozenset[str]]:
    """``a&b`` (all of them) or ``a|b`` (any of them); anything else: ValueError."""
    if not text:
        return False, frozenset()
    names = re.split(r"[&|]", text)
    ops = set(re.findall(r"[&|]", text))
    if not all(_FEATURE.fullmatch(n) for n in names) or ("|" in ops and len(ops) > 1):
        raise ValueError(f"--constraint {_quote(text)} is not modelled (only a&b or a|b)")
    return "|" in ops, frozenset(names)


def _nodes(n: int) -> str:
    return f"{n} node" if n == 1 else f"{n} nodes"


def _quote(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")
