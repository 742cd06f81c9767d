"""CPUs and memory of nodes and jobs, from whatever spelling a backend reads.

Every backend (scontrol text, the OpenAPI JSON, pyslurm) hands its raw numbers to these
helpers, so the rules below are the same everywhere:

* A node offers its *effective* CPUs (``CPUEfctv``: ``CPUTot`` minus specialised cores)
  and ``RealMemory`` minus ``MemSpecLimit``: what slurmctld may give to jobs.
* A running job holds, per node, what its allocation says (``CPU_IDs``/``Mem`` detail
  lines, ``job_resources`` in JSON, pyslurm's resource layout). The snapshot keeps one
  value per job, the smallest over its nodes: requeueing the job must never look like it
  frees more than it does on any of them. Under ``SelectTypeParameters=CR_Core`` (memory
  not consumable) Slurm allocates no memory (``Mem=0``), and neither does the snapshot.
* A pending job needs, per node, what it asked for (see :func:`needed`).

Missing or null values (``N/A``, ``None``, 0) mean "not tracked": None on nodes, 0 on jobs.
A value that is there but unreadable is a :class:`SlurmParseError` naming the field, as
everywhere in the adapters.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal, NamedTuple

from slurm_defrag.domain.cluster import GpuRequest, JobState
from slurm_defrag.domain.gres import GresParseError, count_indices
from slurm_defrag.slurm.parse.mapping import NULLS, gpu_ask, parse_error

# Slurm prints memory in MB, optionally scaled: ``100000``, ``4096M``, ``4G``, ``1.50G``.
# ASCII digits only, and few of them: float("9" * 400) is inf, and round(inf) raises.
_MEMORY = re.compile(r"([0-9]{1,18}(?:\.[0-9]{1,9})?)([KMGTP]?)", re.IGNORECASE | re.ASCII)
_MB_PER_UNIT = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3}

MAX_MEMORY_MB = 2**53
"""Largest memory size read (MB; 8 EiB = 2**63 bytes would be 2**43 MB): exact in a float."""

MAX_CPU_ID = 1 << 16
"""CPU ids in ``CPU_IDs=`` / ``cpu_ids`` must be below this (no node has 65,536 CPUs)."""


class HostUse(NamedTuple):
    """CPUs and memory (MB) on one node; 0 = unknown."""

    cpus: int = 0
    memory_mb: int = 0

    def job_fields(self) -> dict[str, int]:
        """As :class:`~slurm_defrag.domain.cluster.Job` keyword arguments."""
        return {"cpus_per_node": self.cpus, "memory_mb_per_node": self.memory_mb}


def memory_mb(text: str, where: str, field: str) -> int | None:
    """Slurm's memory text (MB unless suffixed, binary units) -> MB; nulls give None."""
    text = text.strip()
    if text in NULLS:
        return None
    match = _MEMORY.fullmatch(text)
    if match is None:
        raise parse_error(where, field, f"not a memory size: {text[:40]!r}")
    mb = round(float(match[1]) * _MB_PER_UNIT[(match[2] or "M").upper()])
    if mb > MAX_MEMORY_MB:
        raise parse_error(where, field, f"memory size out of range: {text!r}")
    return mb


def count_ids(text: str, where: str, field: str) -> int:
    """How many CPUs a ``0-3,8`` id list names (``CPU_IDs=``, pyslurm ``cpu_ids``).

    Counted from the ranges, never expanded: ``CPU_IDs=0-99999999`` costs nothing.
    """
    try:
        return count_indices(text, limit=MAX_CPU_ID, what="CPU id")
    except GresParseError:
        raise parse_error(where, field, f"not a CPU id list: {text[:60]!r}") from None


def per_gpu(text: str, where: str, field: str) -> int | None:
    """``--cpus-per-gpu`` / ``--mem-per-gpu`` as Slurm spells them: ``gres/gpu:4``."""
    ask = gpu_ask(text, where, field)
    return None if ask is None else ask[0]


def gpus_per_node(request: GpuRequest | None) -> int:
    """GPUs a pending job needs on each node (a spreadable ``--gpus=N``: evenly, rounded up)."""
    if request is None:
        return 0
    if request.gpus_per_node is not None:
        return request.gpus_per_node
    return -(-request.gpus // request.nodes)


class Names(NamedTuple):
    """Where one CPU or memory number stands in each structured source (None: absent)."""

    openapi: str | None
    """The field of the OpenAPI JSON (slurmrestd and ``--json``), v0.0.38 and v0.0.42."""
    pyslurm: str | None
    """The attribute of pyslurm's object (its ``to_dict()`` key)."""


Source = Literal["openapi", "pyslurm"]

NODE_HOST: Final[Mapping[str, Names]] = {
    "cpus": Names("cpus", "total_cpus"),
    # v0.0.38 has no effective CPUs or specialised memory: absent, so the totals are used
    "effective_cpus": Names("effective_cpus", "effective_cpus"),
    "cpus_alloc": Names("alloc_cpus", "allocated_cpus"),
    "memory": Names("real_memory", "real_memory"),
    "memory_spec": Names("specialized_memory", "memory_reserved_for_system"),
    "memory_alloc": Names("alloc_memory", "allocated_memory"),
}
""":func:`node_fields` parameter -> the field holding it in each source."""

ASKED: Final[Mapping[str, Names]] = {
    "cpus": Names("cpus", "cpus"),
    "nodes": Names("node_count", "num_nodes"),
    "cpus_per_task": Names("cpus_per_task", "cpus_per_task"),
    "tasks_per_node": Names("tasks_per_node", "ntasks_per_node"),
    "min_cpus_per_node": Names("minimum_cpus_per_node", "min_cpus_per_node"),
    "memory_per_node": Names("memory_per_node", "memory_per_node"),
    "memory_per_cpu": Names("memory_per_cpu", "memory_per_cpu"),
    "cpus_per_gpu": Names(None, "cpus_per_gpu"),
    "memory_per_gpu": Names(None, "memory_per_gpu"),
}
""":func:`needed` parameter -> the job field holding it in each source."""


def read(
    table: Mapping[str, Names], source: Source, number: Callable[[str], int | None]
) -> dict[str, int | None]:
    """``table``'s parameters, each read from ``source``'s field by ``number`` (a field the
    source does not have is left out: the parameter's default applies)."""
    out = {}
    for param, names in table.items():
        key = getattr(names, source)
        if key is not None:
            out[param] = number(key)
    return out


def node_fields(
    *,
    cpus: int | None,
    effective_cpus: int | None = None,
    cpus_alloc: int | None,
    memory: int | None,
    memory_spec: int | None = None,
    memory_alloc: int | None,
) -> dict[str, Any]:
    """A node's host fields as :class:`~slurm_defrag.domain.cluster.Node` keyword arguments.

    Older schemas (OpenAPI v0.0.38) have no effective CPUs or specialised memory; the
    totals are used then.
    """
    schedulable = effective_cpus or cpus
    return {
        "cpus": schedulable or None,
        "cpus_alloc": cpus_alloc or 0,
        "memory_mb": max(0, memory - (memory_spec or 0)) if memory else None,
        "memory_alloc_mb": memory_alloc or 0,
    }


def held(per_node: Iterable[HostUse]) -> HostUse:
    """What a running job holds on each node: the smallest allocation (module docstring)."""
    allocations = list(per_node)
    if not allocations:
        return HostUse()
    return HostUse(min(a.cpus for a in allocations), min(a.memory_mb for a in allocations))


def needed(
    *,
    cpus: int | None,
    nodes: int | None,
    cpus_per_task: int | None = None,
    tasks_per_node: int | None = None,
    min_cpus_per_node: int | None = None,
    memory_per_node: int | None = None,
    memory_per_cpu: int | None = None,
    gpus: int | None = None,
    cpus_per_gpu: int | None = None,
    memory_per_gpu: int | None = None,
) -> HostUse:
    """What a pending job needs on each of its nodes (``gpus``: its GPUs per node).

    CPUs: ``--ntasks-per-node`` x ``--cpus-per-task`` when given, else the job's CPUs over
    its (minimum) node count, rounded up; never below ``MinCPUsNode`` nor ``--cpus-per-gpu``
    x GPUs. The planner places a job on exactly ``request.nodes`` nodes (the minimum
    count), so that is the split to plan for; rounding up keeps a plan startable (with 3
    CPUs on 2 nodes, one node needs 2). Memory: ``--mem-per-gpu`` x GPUs, ``--mem`` (per
    node) or ``--mem-per-cpu`` x those CPUs (Slurm takes one of the three; 24.11 also
    copies the per-GPU value into ``memory_per_node``, so per GPU is read first).
    """
    per_node = 0
    if tasks_per_node:
        per_node = max(cpus_per_task or 1, 1) * tasks_per_node
    elif cpus:
        per_node = -(-cpus // max(nodes or 1, 1))
    per_node = max(per_node, min_cpus_per_node or 0, (cpus_per_gpu or 0) * (gpus or 0))
    if memory_per_gpu:
        return HostUse(per_node, memory_per_gpu * (gpus or 0))
    return HostUse(per_node, memory_per_node or (memory_per_cpu or 0) * per_node)


def job_use(state: JobState, allocation: Iterable[HostUse], need: HostUse) -> dict[str, int]:
    """A job's host fields: what it needs if pending, else what its allocation holds."""
    return (need if state == JobState.PENDING else held(allocation)).job_fields()
