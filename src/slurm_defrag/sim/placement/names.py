"""The placement policies' names, without their code (numpy): what a profile may name.

:mod:`~slurm_defrag.sim.placement.registry` maps each to its builder (a test keeps the two
equal).
"""

from __future__ import annotations

SLURM = "slurm"
"""Slurm's own selection (cons_tres by Weight), the one the levers and job_submit.lua act on."""

PLACEMENTS = ("random", "first-fit", "best-fit", "dot-product", "fgd", "packing", SLURM)
"""Every placement policy, by the name used in profiles, on the command line and in results."""
