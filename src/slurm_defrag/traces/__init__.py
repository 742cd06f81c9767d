"""Public cluster traces turned into simulator input.

Loaders read a trace's files once, validate every row, and return plain
:mod:`slurm_defrag.sim.model` objects; nothing else in the project parses trace files.
Provenance of each trace is in ``shared/traces/README.md``.
"""
