"""Policy: what may be requeued (protections), how much (limits), at what cost, and which
pending jobs are worth planning for (strategies).

Strategies propose targets, the solver optimises, the executor acts; protections and limits
are plain functions here so that the planner and the executor apply the same rules.
"""
