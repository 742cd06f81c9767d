"""The service-cycle fixtures (tests/service_fixtures.py): FakeSlurm, SQLite, a fake clock."""

from service_fixtures import clock, fake, make_cycle, store

__all__ = ["clock", "fake", "make_cycle", "store"]
