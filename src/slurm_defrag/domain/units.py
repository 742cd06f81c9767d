"""Integer units shared by the planner, the solver and the simulator.

One definition, two readings of the same thousandth: the planner and the solver count
costs in milli-GPU-hours (3.6 GPU-seconds: exact enough, no floats in the model); the
simulator counts a GPU's capacity in milli-GPUs (the openb trace's unit, 1000 = one
whole GPU).
"""

from __future__ import annotations

MILLI = 1000
"""Thousandths: milli-GPU-hours in costs, milli-GPUs in the simulator's capacities."""


def share_milli(shards: int, per_gpu: int) -> int:
    """Milli-GPUs ``shards`` of a GPU with ``per_gpu`` shards are, rounded up (a share
    is never read smaller than it is); a GPU without shards counts as full if used."""
    if shards <= 0:
        return 0
    if per_gpu <= 0:
        return MILLI
    return min(MILLI, -(-shards * MILLI // per_gpu))
