"""Benchmarks run from a checkout: the traces sit in ``shared/traces`` beside it.

The package itself never guesses where traces are (``--traces`` / ``$SLURM_DEFRAG_TRACES``);
this default belongs to the repository layout of a developer machine and CI, so it lives
here. Importing this module sets ``SLURM_DEFRAG_TRACES`` unless it is set already.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault(
    "SLURM_DEFRAG_TRACES", str(Path(__file__).resolve().parents[2] / "shared" / "traces")
)
