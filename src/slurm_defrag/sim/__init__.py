"""Trace-driven simulator of a Slurm-like GPU scheduler.

Layers, each in its own module:

* :mod:`~slurm_defrag.sim.model` — what a node and a job are (specs, no state);
* :mod:`~slurm_defrag.sim.cluster_state` — the mutable per-node state as numpy arrays, the only
  place resources are taken or given back;
* :mod:`~slurm_defrag.sim.frag` — the FGD fragmentation measure (Weng et al., ATC '23) for
  fractional GPUs, vectorised over nodes;
* :mod:`~slurm_defrag.sim.placement` — placement policies (which node, which GPUs);
* :mod:`~slurm_defrag.sim.defrag` — the "defrag step" seam where the planner plugs in;
* :mod:`~slurm_defrag.sim.priority` — the queue's priority: none, or priority/multifactor
  (:mod:`~slurm_defrag.sim.multifactor` the factors, :mod:`~slurm_defrag.sim.fair_tree`
  the fair-share, :mod:`~slurm_defrag.sim.usage` the decayed usage,
  :mod:`~slurm_defrag.sim.population` the users, :mod:`~slurm_defrag.sim.site_priority`
  the configurations by name);
* :mod:`~slurm_defrag.sim.protocol_a` / :mod:`~slurm_defrag.sim.protocol_b` — the two
  experiment protocols; :mod:`~slurm_defrag.sim.experiment` runs grids of them;
* :mod:`~slurm_defrag.sim.wait_classes` — the wait tail and who waits (per class of job);
* :mod:`~slurm_defrag.sim.report` — tables, JSON and plots.

Everything random draws from a ``numpy.random.Generator`` seeded by the caller, so the same
seed gives the same result.
"""
