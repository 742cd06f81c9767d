"""Adapters to Slurm: the only code that runs Slurm commands or talks to slurmrestd/pyslurm.

``port.py`` defines what the rest of slurm-defrag may ask of Slurm; ``cli.py``, ``rest.py``
and ``pyslurm_adapter.py`` implement it; ``fake.py`` is an in-memory Slurm for unit tests and
for dry-run.
"""
