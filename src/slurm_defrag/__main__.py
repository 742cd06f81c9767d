"""``python -m slurm_defrag``: the same as the ``slurm-defrag`` command."""

from slurm_defrag.cli import main

main()
