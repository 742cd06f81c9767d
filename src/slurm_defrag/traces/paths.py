"""Where the shared traces live.

Order: ``$SLURM_DEFRAG_TRACES``, then ``shared/traces`` beside the repository (the layout of
a developer machine and of CI), then ``/work/shared/traces``.
"""

from __future__ import annotations

import os
from pathlib import Path

from slurm_defrag.errors import InputError

ENV_VAR = "SLURM_DEFRAG_TRACES"


def trace_root() -> Path:
    """The folder that holds ``alibaba-gpu-v2023/`` and the other traces."""
    env = os.environ.get(ENV_VAR)
    candidates = [Path(env)] if env else []
    repo = Path(__file__).resolve().parents[3]
    candidates += [repo.parent / "shared" / "traces", Path("/work/shared/traces")]
    for c in candidates:
        if c.is_dir():
            return c
    tried = ", ".join(str(c) for c in candidates)
    raise InputError(f"no trace folder found (tried {tried}); set {ENV_VAR}")
