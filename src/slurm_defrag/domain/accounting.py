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


@dataclass(frozen=True)
class SiteJob:
    """One finished job of a site's accounting, as ``simulate --workload sacct:FILE``
    replays it (:func:`slurm_defrag.slurm.parse.sacct.read_site_jobs`); times are epoch seconds,
    resources the job's totals over its ``nodes``."""

    job_id: str
    submit_t: float
    start_t: float
    run_s: float
    """Elapsed (else End - Start) of the run kept: the last record of a requeued job."""
    time_limit_s: float | None
    """Timelimit; None: unlimited or not given."""
    nodes: int = 1
    cpus: int = 0
    memory_mb: int = 0
    """0: not given."""
    gpus: int = 0
    gpu_model: str | None = None
    """The GPU type of a typed request (``gres/gpu:a100=2``); None: any."""
    user: str = ""
    account: str = ""
    partition: str = ""
    qos: str = ""
    state: str = ""
    runs: int = 1
    """Records sacct -D showed for this job (more than 1: requeued)."""


@dataclass
class SiteRead:
    """What :func:`~slurm_defrag.slurm.parse.sacct.read_site_jobs` made of a file: the jobs, one
    line per bad record, and how many records were skipped for each reason."""

    jobs: list[SiteJob]
    problems: list[str]
    skipped: dict[str, int]
    records: int = 0
    """Records read (job steps included)."""
