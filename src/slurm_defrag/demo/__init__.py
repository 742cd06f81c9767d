"""``slurm-defrag demo``: the whole loop offline, on a simulated cluster.

* :mod:`~slurm_defrag.demo.backend` — the Slurm port (reader and writer) over the
  simulator's :class:`~slurm_defrag.sim.live.LiveCluster`: a backend like cli, rest and
  pyslurm, handed to the service by its composition root;
* :mod:`~slurm_defrag.demo.scenario` — the cluster and its jobs (the course's cluster,
  grown);
* :mod:`~slurm_defrag.demo.profiles` — the policies the service may run with;
* :mod:`~slurm_defrag.demo.run` — the service cycle and the cluster in lockstep, and what
  the summary reports.

It sits above the simulator and the Slurm adapters (it joins them) and below the
composition root, which builds the service on it (docs/architecture.md).
"""
