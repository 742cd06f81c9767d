"""Pure data model of a GPU cluster: no I/O, immutable, validated at construction.

Everything else in slurm-defrag (adapters, metrics, planner, store) speaks these types.
"""
