"""Colours for jobs in a GPU map: jobs that share a node never get the same one.

A map colours each GPU by the job holding it. A colour taken from a hash of the job id
alone is stable, but two jobs on one node then share a colour once in a palette's length
of pairs (1 in 16 on the terminal) and the map reads as one job (issue #45). Here each
job keeps its hash's colour unless a job beside it on a node already has that colour;
then it takes the next free one (greedy colouring of the "shares a node" graph, jobs in
id order, so the same snapshot always gets the same colours). Both views use it: the
terminal map (``report/gpu_map.py``) and the web page (``web/payload.py``).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from itertools import count

from slurm_defrag.domain.cluster import UNKNOWN_OWNER, ClusterSnapshot


def preferred(job_id: str, size: int) -> int:
    """The slot a job takes when nothing beside it has it: a hash of its id."""
    return zlib.crc32(job_id.encode()) % size


def _order(job_id: str) -> tuple[int, str]:
    return (len(job_id), job_id)  # numeric ids in numeric order: 99 before 100


def colour_slots(
    snapshot: ClusterSnapshot, size: int, prefer: Callable[[str, int], int] = preferred
) -> dict[str, int]:
    """A slot in ``0..size-1`` per job holding GPUs, different from every job it shares a
    node with; a job whose neighbours hold all ``size`` slots gets one from ``size`` up
    (never equal to a neighbour's: the caller decides how to draw those)."""
    beside: dict[str, set[str]] = {}
    for owners in snapshot.gpu_owners.values():
        jobs = {o for o in owners if o is not None and o != UNKNOWN_OWNER}
        for job in jobs:
            beside.setdefault(job, set()).update(jobs - {job})
    slots: dict[str, int] = {}
    for job in sorted(beside, key=_order):
        taken = {slots[other] for other in beside[job] if other in slots}
        start = prefer(job, size)
        free = (s for s in ((start + k) % size for k in range(size)) if s not in taken)
        slot = next(free, None)
        slots[job] = slot if slot is not None else next(s for s in count(size) if s not in taken)
    return slots
