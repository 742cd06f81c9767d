"""slurm-defrag: measure and repair GPU fragmentation on Slurm clusters."""

__version__ = "0.1.0"
