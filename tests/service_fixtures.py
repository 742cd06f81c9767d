"""Fixtures of the tests that run the service cycle: the course scenario on FakeSlurm, SQLite,
a fake clock. The conftest of each folder that needs them imports them by name
(tests/service/, tests/web/)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from service_helpers import CycleFactory, FakeClock, open_store
from slurm_defrag.actuator.executor import Hook
from slurm_defrag.actuator.killswitch import KillSwitch
from slurm_defrag.actuator.route_file import RouteFile
from slurm_defrag.policy.file import Policy, default_policy
from slurm_defrag.service.loop import Cycle, CycleDeps, CycleRules
from slurm_defrag.service.observer import NO_OBSERVER, Observer
from slurm_defrag.slurm.fake import FakeSlurm
from slurm_defrag.store.database import Store
from slurm_defrag.store.lease import Lease
from slurm_defrag.store.repo import Repository
from slurm_defrag.synth import EPOCH, course_scenario


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(EPOCH)


@pytest.fixture
def fake(clock: FakeClock) -> FakeSlurm:
    return FakeSlurm(course_scenario(), clock=clock)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(tmp_path / "defrag.db")
    yield s
    s.close()


@pytest.fixture
def make_cycle(fake: FakeSlurm, store: Store, clock: FakeClock, tmp_path: Path) -> CycleFactory:
    """A new service instance on the same database and Slurm (as after a restart)."""

    def make(
        mode: str = "enforce",
        *,
        holder: str = "test:1",
        hook: Hook | None = None,
        policy: Policy | None = None,
        ttl_s: float = 900.0,
        reader: object = None,
        packing_bump: int | None = None,
        packing_lever: str = "idle-bump",
        observer: Observer = NO_OBSERVER,
        route_file: RouteFile | None = None,
    ) -> Cycle:
        deps = CycleDeps(
            reader or fake,
            fake,
            Repository(store),  # type: ignore[arg-type]
            Lease(store, holder, ttl_s=30),
            KillSwitch(tmp_path / "STOP"),
            route_file=route_file,
        )
        rules = CycleRules(
            mode, policy or default_policy(), ttl_s, packing_bump, packing_lever=packing_lever
        )
        return Cycle(deps, rules, clock=clock, hook=hook, observer=observer)

    return make
