"""Test helpers for the service: a fake clock, a store, a Slurm scheduler stand-in."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from slurm_defrag.actuator.step_errors import SimulatedCrash
from slurm_defrag.domain.cluster import JobState
from slurm_defrag.domain.plan import Plan
from slurm_defrag.service.loop import Cycle
from slurm_defrag.slurm.fake import FakeSlurm
from slurm_defrag.store import migrate
from slurm_defrag.store.database import Store
from slurm_defrag.store.engine import make_engine

CycleFactory = Callable[..., Cycle]
"""``make_cycle(mode, holder=..., hook=..., policy=..., ttl_s=..., reader=...)``"""


class FakeClock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def open_store(path: Path) -> Store:
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    return Store.open(url)


def slurm_schedules(fake: FakeSlurm, plan: Plan) -> bool:
    """What slurmctld does after a hand-over: start each served target on its planned GPUs
    once they are free and the target was moved into the plan's reservation. True if any
    target was started."""
    handed = {
        c[1]
        for c in fake.calls
        if c[0] == "update_job" and f"ReservationName={plan.reservation}" in c
    }
    started = False
    for t in plan.served:
        job = fake.jobs[t.job_id]
        if t.job_id not in handed or job["state"] != JobState.PENDING:
            continue
        if any(set(p.gpus) & set(fake.nodes[p.node]["gpus_used"]) for p in t.placements):
            continue
        for p in t.placements:
            node = fake.nodes[p.node]
            node["gpus_used"] = sorted(set(node["gpus_used"]) | set(p.gpus))
        job.update(
            state=JobState.RUNNING,
            reason="None",
            start_time=fake.snapshot().taken_at,
            gpus={p.node: frozenset(p.gpus) for p in t.placements},
        )
        started = True
    return started


def crash_at(kind: str, phase: str):  # type: ignore[no-untyped-def]
    """A hook that 'kills' the process at (step kind, phase), once."""
    fired = []

    def hook(k: str, ph: str) -> None:
        if (k, ph) == (kind, phase) and not fired:
            fired.append(1)
            raise SimulatedCrash(f"{kind}:{phase}")

    return hook
