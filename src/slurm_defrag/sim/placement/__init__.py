"""Placement policies: given the nodes where a job fits, pick one node and its GPUs.

One module per policy; :mod:`~slurm_defrag.sim.placement.registry` maps names to builders.
Policies read :class:`~slurm_defrag.sim.cluster_state.ClusterState` and never change it.
"""
