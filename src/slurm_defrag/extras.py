"""Optional parts of the install: one clear line when a command needs one that is missing.

The base install is the service and the CLI. The simulator (numpy), plots (matplotlib),
PostgreSQL (psycopg) and the pyslurm backend are extras (``pip install
'slurm-defrag[sim]'``), so a site running the service next to slurmctld does not carry a
plotting stack.
"""

from __future__ import annotations

import importlib.util
import shlex
from pathlib import Path

from slurm_defrag.errors import DefragError


class MissingExtraError(DefragError):
    """A command needs an optional dependency that is not installed."""


def checkout() -> Path | None:
    """The source checkout this package runs from (an editable install, ``PYTHONPATH=src``),
    or None for an installed wheel."""
    here = Path(__file__).resolve().parent  # .../src/slurm_defrag
    root = here.parents[1]
    if here.parent.name == "src" and (root / "pyproject.toml").is_file():
        return root
    return None


def install_hint(extra: str) -> str:
    """How to install ``extra``: right for a wheel and for a source checkout (where
    ``pip install 'slurm-defrag[...]'`` would fetch another copy instead)."""
    wheel = f"pip install 'slurm-defrag[{extra}]'"
    root = checkout()
    if root is None:
        return f"{wheel} (from a source checkout: pip install -e '.[{extra}]' in its folder)"
    here = shlex.quote(f"{root}[{extra}]")
    return f"pip install -e {here} (this checkout; from a package index: {wheel})"


def require_extra(module: str, extra: str, what: str) -> None:
    """Raise :class:`MissingExtraError` naming the extra when ``module`` is not importable."""
    if importlib.util.find_spec(module) is None:
        raise MissingExtraError(
            f"{what} needs the optional package {module!r}: {install_hint(extra)}"
        )
