"""Integer units shared by the planner, the solver and the simulator.

One definition, two readings of the same thousandth: the planner and the solver count
costs in milli-GPU-hours (3.6 GPU-seconds: exact enough, no floats in the model); the
simulator counts a GPU's capacity in milli-GPUs (the openb trace's unit, 1000 = one
whole GPU).
"""

from __future__ import annotations

MILLI = 1000
"""Thousandths: milli-GPU-hours in costs, milli-GPUs in the simulator's capacities."""
