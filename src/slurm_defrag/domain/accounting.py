"""What Slurm's accounting knows of a job: when it was submitted and started.

The impact report reads job waits from the snapshots' pending-to-running transitions; a
site may refine them with ``sacct`` (exact submit and start times, jobs the snapshots never
saw). :mod:`slurm_defrag.slurm.parse.sacct` reads that output into these records.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AccountedJob:
    """One job (allocation) as ``sacct`` reports it; times are epoch seconds."""

    job_id: str
    submit_t: float
    start_t: float | None
    """None: it has not started (``Unknown``/``None`` in sacct)."""
    gpus: int | None = None
    """GPUs allocated (``AllocTRES``) or asked (``ReqTRES``); None: the output had neither."""
    state: str = ""
