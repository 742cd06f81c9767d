"""What the protections cost a target: the cheapest set a protection excluded.

Priced directly, without solving again: for each eligible node holding a protected job, the
cheapest block of the target's shape if its protected holders were requeueable too, each
job at the planner's own cost. GPUs only (CPUs and memory are not re-checked), and
single-node targets only. A waiver does not lift the swap rule: a set holding a job as large
as the share there (protected or not) is never offered, the planner would not take it either.

Why it is searched and not scanned: pricing every (node, shape) of a 10,000-node cluster
was 9 s of a 16 s plan (issue #42), for one sentence per target. A waived set holds at
least one protected job that a waiver frees, so its cost is at least that job's: the
cheapest such job of a node (its *floor*) bounds every set on it from below. Nodes are
visited in floor order and exact prices stop as soon as no later node can win, or (for a
served target) can undercut what the plan pays. The sentence is the one a full scan gives:
the minimum is over the same sets, ties broken the same way (cost, then node name).
"""

from __future__ import annotations

from dataclasses import dataclass

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.domain.topology import indices_of
from slurm_defrag.planner.candidates import Candidates, TargetSpec
from slurm_defrag.planner.geometry import Geometry, blocks_for, share_size
from slurm_defrag.planner.nodes import JobTable
from slurm_defrag.policy.cost import restart_wait_hours, victim_cost

UNWAIVABLE = ("Requeue=0", "no start time", "state ")
"""Reasons no waiver changes: Slurm refuses the requeue, the loss cannot be priced, or the
job is not running. A set holding such a job is never offered as "cheaper"."""

MARGIN = 0.005
"""GPU-hours: a waived set must undercut the plan's cost by more than rounding to show."""


@dataclass(frozen=True)
class Waived:
    """The cheapest single-node set for a share had the protections been waived."""

    node: str
    cost: float
    """GPU-hours (the planner's cost: lost work x weight, plus restart wait if priced)."""
    victims: tuple[str, ...]
    protected: tuple[tuple[str, tuple[str, ...]], ...]
    """(job id, its protection reasons) for the protected jobs among ``victims``."""


class ProtectionCosts:
    """One plan's pricing of waived protections, shared by all its targets: job costs,
    node floors, floor orders and exact prices are each computed once."""

    def __init__(self, snapshot: ClusterSnapshot, cands: Candidates, table: JobTable) -> None:
        self.snapshot = snapshot
        self.cands = cands
        self.table = table
        self._job_costs: dict[str, float] = {}
        self._floors: dict[int, float | None] = {}
        self._waived: dict[tuple[int, Geometry], Waived | None] = {}
        self._orders: dict[int, list[tuple[float, str, int]]] = {}
        """id(eligible list) -> (floor, node name, node) of its nodes with a floor, sorted.
        Targets of one class share their eligible list (``CandidateBuilder.eligibility``)."""

    def sentence(self, spec: TargetSpec, t: int, cost_now: float | None) -> str:
        """A sentence to append to target ``t``'s explanation, or ''. ``cost_now``: its cost
        in the plan (None: not served); a waived set shows only when cheaper than that."""
        if spec.nodes != 1:
            return ""
        best = self._cheapest(self.cands.info[t].eligible, spec.geometry, cost_now)
        if best is None or (cost_now is not None and best.cost >= cost_now - MARGIN):
            return ""
        who = "; ".join(f"job {j} by {', '.join(r)}" for j, r in best.protected)
        than = f", against {cost_now:.2f} in this plan" if cost_now is not None else ""
        return (
            f" Protections excluded a cheaper set: requeueing {', '.join(best.victims)} on "
            f"{best.node} would cost {best.cost:.2f} GPU-h{than}; protected: {who}."
        )

    def _cheapest(self, eligible: list[int], g: Geometry, cost_now: float | None) -> Waived | None:
        """The least (cost, node) waived set over ``eligible``, or None; when ``cost_now``
        is given, None also when no set can undercut it by more than :data:`MARGIN`."""
        limit = float("inf") if cost_now is None else cost_now - MARGIN
        best: Waived | None = None
        for floor, _, n in self._order(eligible):
            # Every set on this node and all later ones costs at least ``floor``.
            if floor >= limit or (best is not None and floor > best.cost):
                break
            w = self._waived_on(n, g)
            if w is not None and (best is None or (w.cost, w.node) < (best.cost, best.node)):
                best = w
        return best

    def _order(self, eligible: list[int]) -> list[tuple[float, str, int]]:
        order = self._orders.get(id(eligible))
        if order is None:
            order = []
            names = self.snapshot.nodes
            for n in eligible:
                floor = self._floor(n)
                if floor is not None:
                    order.append((floor, names[n].name, n))
            order.sort()
            self._orders[id(eligible)] = order
        return order

    def _floor(self, n: int) -> float | None:
        """The cheapest protected job on ``n`` that a waiver frees (None: no set to offer)."""
        if n in self._floors:  # classes' eligible lists overlap: each node once
            return self._floors[n]
        st = self.cands.builder.state(n)
        floor = None
        if st.immovable:  # else nothing protected here: the planner priced every set
            costs = [
                self._job_cost(h)
                for h in {st.blocker_ids[i] for i in indices_of(st.immovable)}
                if h is not None and self._waivable(h)
            ]
            floor = min(costs) if costs else None
        self._floors[n] = floor
        return floor

    def _waivable(self, jid: str) -> bool:
        return jid in self.snapshot.job_by_id and not any(
            r.startswith(UNWAIVABLE) for r in self.table.protected.get(jid, ())
        )

    def _job_cost(self, jid: str) -> float:
        hit = self._job_costs.get(jid)
        if hit is None:
            table = self.table
            if jid in table.index:
                hit = table.costs[table.index[jid]].cost
            else:
                job = self.snapshot.job_by_id[jid]
                cfg = table.cost_cfg
                wait = (
                    restart_wait_hours(job, self.snapshot, table.now, cfg.max_wait_hours)
                    if cfg.requeue_wait_weight > 0
                    else 0.0
                )
                hit = victim_cost(job, table.now, cfg, wait).cost
            self._job_costs[jid] = hit
        return hit

    def _waived_on(self, n: int, g: Geometry) -> Waived | None:
        key = (n, g)
        if key not in self._waived:
            self._waived[key] = self._price(n, g)
        return self._waived[key]

    def _price(self, n: int, g: Geometry) -> Waived | None:
        """The cheapest block of ``g`` on ``n`` that a waiver opens (first of equals in
        block order), every holder at the planner's cost, none as large as the share."""
        st = self.cands.builder.state(n)
        size = share_size(st.topo, g)
        best: tuple[float, tuple[str, ...]] | None = None
        for block in blocks_for(st.topo, g):
            if not block & st.immovable:
                continue
            holders = sorted({b for i in indices_of(block) if (b := st.blocker_ids[i]) is not None})
            if not all(self._waivable(h) for h in holders):
                continue
            if any(st.blocker_ids.count(h) >= size for h in holders):
                continue  # the swap rule: no waiver makes that a plan
            cost = sum(self._job_cost(h) for h in holders)
            if best is None or cost < best[0]:
                best = (cost, tuple(holders))
        if best is None:
            return None
        reasons = self.table.protected
        protected = tuple((h, reasons[h]) for h in best[1] if h in reasons)
        return Waived(st.node.name, best[0], best[1], protected)
