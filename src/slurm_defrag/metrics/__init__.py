"""Fragmentation metrics: per node, per partition, per cluster, and false starvation.

Pure functions of a :class:`~slurm_defrag.domain.cluster.ClusterSnapshot` and a workload
mix. See ``docs/metrics.md`` for every definition and a worked example.
"""
