"""The limits' :class:`PreemptionHistory`, read from the plans table.

A requeue counts once its ``requeue`` step of an ``enforce`` plan is recorded done; the
victim's user is kept in the step's args. Dry-run plans never count: nothing happened.
Each count is one query (:meth:`~slurm_defrag.store.plans.Plans.requeues_since`), cheap
enough for every cycle and every requeue; ``window`` bounds the open plans looked at.
"""

from __future__ import annotations

from datetime import UTC, datetime

from slurm_defrag.store.plans import Plans


class StoreHistory:
    def __init__(self, plans: Plans, cluster: str | None = None, window: int = 500) -> None:
        self.plans = plans
        self.cluster = cluster
        self.window = window

    def preemptions_since(self, since: datetime) -> int:
        return self.plans.requeues_since(_utc(since), cluster=self.cluster)

    def user_preemptions_since(self, user: str, since: datetime) -> int:
        return self.plans.requeues_since(_utc(since), cluster=self.cluster, user=user)

    def active_plans(self) -> int:
        open_ = self.plans.recent(cluster=self.cluster, open_only=True, limit=self.window)
        return sum(1 for p in open_ if p.mode == "enforce" and "plan" in p.inputs)


def _utc(t: datetime) -> datetime:
    # A naive time is UTC, as everywhere in the store.
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)
