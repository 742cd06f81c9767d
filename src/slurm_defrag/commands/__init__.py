"""One module per CLI command group; ``slurm_defrag.cli`` registers them."""
