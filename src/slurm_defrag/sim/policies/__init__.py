"""Placement policies: given the nodes where a job fits, pick one node and its GPUs.

One module per policy; :mod:`~slurm_defrag.sim.policies.registry` maps names to builders.
Policies read :class:`~slurm_defrag.sim.cluster.ClusterState` and never change it.
"""
