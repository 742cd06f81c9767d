"""CP-SAT lives here and only here: problem data in, result out.

Layers (PyJobShop's shape): :mod:`.problem` is solver-agnostic data validated on
construction; :mod:`.model` is the CP-SAT model (variables / constraints / objective) and its
solve; :mod:`.result` what a solve returns; :mod:`.parameters` the ``[solver]`` table. This
package imports nothing of the planner, the policy or the metrics: turning a snapshot and a
policy into :class:`~.problem.ProblemData`, and a :class:`~.result.SolveResult` back into a
plan, is :mod:`slurm_defrag.planner`'s job.
"""
