"""The limits' :class:`PreemptionHistory`, read from the plans table.

A requeue counts once its ``requeue`` step of an ``enforce`` plan is recorded done; the
victim's user, the GPU-hours it lost (as the plan priced them) and the users whose pending
jobs it freed GPUs for (``for_users``) are kept in the step's args when the plan is
admitted. Dry-run plans never count: nothing happened. Each count is one query
(:meth:`~slurm_defrag.store.plans.Plans.requeues_since`,
:meth:`~slurm_defrag.store.plans.Plans.requeue_usage_since`; every user's at once:
:meth:`~slurm_defrag.store.plans.Plans.requeues_by_user_since`), cheap enough for every
cycle and every requeue; ``window`` bounds the open plans looked at. Steps recorded before
``for_users`` existed count on the victim side only.
"""

from __future__ import annotations

from datetime import UTC, datetime

from slurm_defrag.policy.limits import Usage, UserUsage
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

    def victim_usage(self, user: str, since: datetime) -> Usage:
        return Usage(*self.plans.requeue_usage_since(_utc(since), cluster=self.cluster, user=user))

    def beneficiary_usage(self, user: str, since: datetime) -> Usage:
        return Usage(
            *self.plans.requeue_usage_since(_utc(since), cluster=self.cluster, for_user=user)
        )

    def usage_by_user(self, since: datetime) -> UserUsage:
        return UserUsage.count(self.plans.requeues_by_user_since(_utc(since), cluster=self.cluster))

    def active_plans(self) -> int:
        open_ = self.plans.recent(cluster=self.cluster, open_only=True, limit=self.window)
        return sum(1 for p in open_ if p.mode == "enforce" and "plan" in p.inputs)


def _utc(t: datetime) -> datetime:
    # A naive time is UTC, as everywhere in the store.
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)
