"""The planner's optimisation: CP-SAT lives here and only here.

Layers (PyJobShop's shape): :mod:`.problem` is solver-agnostic data validated on
construction; :mod:`.candidates` turns a snapshot and a policy into that data (with
pruning); :mod:`.model` is the CP-SAT model (variables / constraints / objective) and its
solve; :mod:`.planner` is the facade that decomposes, solves and assembles a
:class:`~slurm_defrag.domain.plan.Plan`.
"""
