"""Nodes and jobs as the simulator sees them: immutable specs, no state.

Units follow the Alibaba openb trace and the FGD artifact: CPU in milli-cores, memory in
MiB, GPU capacity in milli-GPUs per GPU (1000 = a whole GPU). A job asks for ``num_gpu``
GPUs with ``gpu_milli`` each on one node; ``gpu_milli < 1000`` only with ``num_gpu == 1``
(a shared GPU, Slurm's ``shard`` GRES).
"""

from __future__ import annotations

from dataclasses import dataclass

from slurm_defrag.domain.units import MILLI


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node. ``weight`` and list order mimic Slurm's node ``Weight`` and node order."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str
    topology: str | None = None
    """Name of a built-in :mod:`slurm_defrag.domain.topology` template (None: PCIe only)."""
    weight: int = 1
    features: frozenset[str] = frozenset()
    """Node features at the start (slurm.conf ``Feature=``); levers may change them."""

    def __post_init__(self) -> None:
        if self.cpu_milli < 0 or self.memory_mib < 0 or not 0 <= self.gpus <= 16:
            raise ValueError(f"node {self.name}: negative capacity or more than 16 GPUs")


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job (an openb pod). ``gpu_models`` None means any GPU model."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int = 0
    gpu_milli: int = 0
    gpu_models: frozenset[str] | None = None
    submit: float = 0.0
    """Submit time in seconds (Protocol B)."""
    duration: float = 0.0
    """Run time in seconds once started (Protocol B)."""
    priority: int = 0
    nvlink: bool = False
    """The job's GPUs must form one free NVLink block (``num_gpu >= 2``)."""
    time_limit: float | None = None
    """What backfill plans with (Slurm's time limit); None: the exact run time."""
    prefer: str | None = None
    """Slurm's ``--prefer`` feature (soft; the ``slurm`` policy honours it), as
    job_submit.lua sets it at submit (:mod:`slurm_defrag.sim.submit_hook`)."""
    exclude: frozenset[str] | None = None
    """Node names Slurm's ``--exclude`` keeps the job off, as job_submit.lua sets them
    (``short_first.keep``)."""
    ckpt_interval: float | None = None
    """The job checkpoints every this many seconds of run time (None: never); a requeue
    loses only the run since its last checkpoint, and it resumes from there."""
    user: str = ""
    account: str = ""
    """Who submitted it, for fair-share (:mod:`slurm_defrag.sim.population`; the trace
    has none)."""

    def __post_init__(self) -> None:
        if self.num_gpu < 0 or not 0 <= self.gpu_milli <= MILLI:
            raise ValueError(f"job {self.name}: GPU request out of range")
        if (self.num_gpu == 0) != (self.gpu_milli == 0):
            raise ValueError(f"job {self.name}: num_gpu and gpu_milli must both be zero or not")
        if self.num_gpu > 1 and self.gpu_milli != MILLI:
            raise ValueError(f"job {self.name}: a multi-GPU job must take whole GPUs")

    @property
    def estimate(self) -> float:
        """Run time the scheduler expects: the time limit if set, else the run time."""
        return self.duration if self.time_limit is None else self.time_limit

    @property
    def total_milli(self) -> int:
        """GPU demand in milli-GPUs."""
        return self.num_gpu * self.gpu_milli

    @property
    def shared(self) -> bool:
        """Asks for part of one GPU."""
        return self.num_gpu == 1 and self.gpu_milli < MILLI

    @property
    def shape(
        self,
    ) -> tuple[int, int, int, int, frozenset[str] | None, bool, frozenset[str] | None]:
        """Everything placement depends on: jobs of one shape are interchangeable."""
        return (
            self.cpu_milli,
            self.memory_mib,
            self.num_gpu,
            self.gpu_milli,
            self.gpu_models,
            self.nvlink,
            self.exclude,
        )


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a job runs: a node index and the GPU indices it takes there."""

    node: int
    gpus: tuple[int, ...]
