"""Optional parts of the install: one clear line when a command needs one that is missing.

The base install is the service and the CLI. The simulator (numpy), plots (matplotlib),
PostgreSQL (psycopg) and the pyslurm backend are extras (``pip install
'slurm-defrag[sim]'``), so a site running the service next to slurmctld does not carry a
plotting stack.
"""

from __future__ import annotations

import importlib.util

from slurm_defrag.errors import DefragError


class MissingExtraError(DefragError):
    """A command needs an optional dependency that is not installed."""


def require_extra(module: str, extra: str, what: str) -> None:
    """Raise :class:`MissingExtraError` naming the extra when ``module`` is not importable."""
    if importlib.util.find_spec(module) is None:
        raise MissingExtraError(
            f"{what} needs the optional package {module!r}: pip install 'slurm-defrag[{extra}]'"
        )
