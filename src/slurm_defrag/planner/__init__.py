"""The planner: snapshot + policy (+ targets) -> :class:`~slurm_defrag.domain.plan.Plan`.

Never talks to Slurm and never acts. Modules, in the order of the work:

* :mod:`.nodes` — per-node state and the movable jobs (protections applied);
* :mod:`.geometry` — which GPU sets a request may take on a node;
* :mod:`.candidates` — candidate placements and their victims (pruned when big);
* :mod:`.build` — candidates -> :class:`~slurm_defrag.solver.problem.ProblemData`;
* :mod:`.decompose` — independent parts of a problem, solved one by one;
* :mod:`.assemble` / :mod:`.explain` — a solve result -> the plan and its reasons;
* :mod:`.facade` — :func:`~.facade.make_plan`, the one entry point.

The optimisation itself is :mod:`slurm_defrag.solver` (CP-SAT only).
"""
