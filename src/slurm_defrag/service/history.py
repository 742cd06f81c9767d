"""The limits' :class:`PreemptionHistory`, read from the plans table.

A requeue counts once its ``requeue`` step of an ``enforce`` plan is recorded done; the
victim's user is kept in the step's args. Dry-run plans never count: nothing happened.
Reads the last ``window`` plans only: enough for the hour and day windows of any sane
limit (a plan requeues a handful of jobs), and cheap enough for every cycle.
"""

from __future__ import annotations

from datetime import UTC, datetime

from slurm_defrag.store.plans import Plans, StepRecord


class StoreHistory:
    def __init__(self, plans: Plans, cluster: str | None = None, window: int = 500) -> None:
        self.plans = plans
        self.cluster = cluster
        self.window = window

    def _requeues(self, since: datetime) -> list[StepRecord]:
        out = []
        for p in self.plans.recent(cluster=self.cluster, limit=self.window):
            if p.mode != "enforce":
                continue
            for s in self.plans.steps(p.id):
                if s.action == "requeue" and s.state == "done" and s.finished_at is not None \
                        and _utc(s.finished_at) >= _utc(since):
                    out.append(s)
        return out

    def preemptions_since(self, since: datetime) -> int:
        return len(self._requeues(since))

    def user_preemptions_since(self, user: str, since: datetime) -> int:
        return sum(1 for s in self._requeues(since) if s.args.get("user") == user)

    def active_plans(self) -> int:
        open_ = self.plans.recent(cluster=self.cluster, open_only=True, limit=self.window)
        return sum(1 for p in open_ if p.mode == "enforce" and "plan" in p.inputs)


def _utc(t: datetime) -> datetime:
    # SQLite hands back naive datetimes; the store writes UTC.
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)
