"""Slurm's own selection for a one-node job: cons_tres order plus ``--prefer``.

Nodes are taken by ascending *current* ``Weight``, then in node order (as
:class:`~slurm_defrag.sim.placement.first_fit.FirstFit`), GPUs by lowest index; weights and
features are the cluster's mutable state (:class:`~slurm_defrag.sim.cluster_state.ClusterState`),
so levers that change them between placements steer this policy as they steer Slurm.

``--prefer`` (``JobSpec.prefer``) is a soft constraint. sbatch(1): "Nodes can have
features assigned to them by the Slurm administrator. Users can specify which of these
features are desired but not required by their job using the prefer option. [...] When
scheduling, the features in --prefer are tried first; if a node set isn't available with
those features then --constraint is attempted." In slurmctld (node_scheduler.c,
``select_nodes``, 22.05 and later) the job is first tried with ``features_use`` set to its
prefer list and, when that attempt cannot start it, tried again in the same call with its
``--constraint`` features (none here): the fallback needs no later pass. What we could and
could not check: the code search available to us did not return the 22.05+
node_scheduler.c (only 0.x/1.x tags, which predate --prefer), so the two-attempt structure
is as we read the released source and man page, not re-read here; the live cross-check
with levers active (lead) is what confirms it. So: the preferred nodes where the job fits
now, first in cons_tres order; if there are none, every node where it fits, same order.
Without a prefer this is exactly ``first-fit``.
"""

from __future__ import annotations

import numpy as np

from slurm_defrag.sim import gpus
from slurm_defrag.sim.cluster_state import BoolArray, ClusterState
from slurm_defrag.sim.model import JobSpec, Placement
from slurm_defrag.sim.placement.base import PolicyContext


def first_in_order(state: ClusterState, where: BoolArray) -> int | None:
    """The first node of ``where`` in cons_tres order (lowest Weight, then index)."""
    order = state.slurm_order
    ordered = where[order]
    if not ordered.any():
        return None
    return int(order[int(np.argmax(ordered))])


class SlurmSelect:
    name = "slurm"

    def __init__(self, ctx: PolicyContext) -> None:
        del ctx

    def choose(
        self, state: ClusterState, job: JobSpec, feasible: BoolArray, rng: np.random.Generator
    ) -> Placement | None:
        node = None
        if job.prefer:
            node = first_in_order(state, feasible & state.feature_mask(job.prefer))
        if node is None:
            node = first_in_order(state, feasible)
        if node is None:
            return None
        return Placement(node, gpus.lowest(state, node, job))
