"""Trace-driven simulator of a Slurm-like GPU scheduler.

Layers, each in its own module:

* :mod:`~slurm_defrag.sim.model` — what a node and a job are (specs, no state);
* :mod:`~slurm_defrag.sim.cluster` — the mutable per-node state as numpy arrays, the only
  place resources are taken or given back;
* :mod:`~slurm_defrag.sim.frag` — the FGD fragmentation measure (Weng et al., ATC '23) for
  fractional GPUs, vectorised over nodes;
* :mod:`~slurm_defrag.sim.policies` — placement policies (which node, which GPUs);
* :mod:`~slurm_defrag.sim.defrag` — the "defrag step" seam where the planner plugs in;
* :mod:`~slurm_defrag.sim.protocol_a` / :mod:`~slurm_defrag.sim.protocol_b` — the two
  experiment protocols; :mod:`~slurm_defrag.sim.experiment` runs grids of them;
* :mod:`~slurm_defrag.sim.report` — tables, JSON and plots.

Everything random draws from a ``numpy.random.Generator`` seeded by the caller, so the same
seed gives the same result.
"""
