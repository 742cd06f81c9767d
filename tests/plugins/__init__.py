"""Tests of the Slurm-side hooks (slurm-plugins/); a package so the live fixture is
scoped to these tests (installed before the first, removed after the last)."""
