"""Composition root: settings -> store, Slurm backend, policy, lease, cycle, service, pages.

The only place that knows the mode's consequences for wiring: ``enforce`` hands the real
backend to the executor as its writer; ``dry-run`` does too, but the cycle then runs the
executor on a sandbox (see :mod:`slurm_defrag.service.loop`), and ``off`` never reaches
the executor.

It sits above :mod:`slurm_defrag.service` and :mod:`slurm_defrag.web` (the web pages are
served by the service's HTTP server and import its ``Page`` type), so neither of those
imports the other's composition; only ``slurm-defrag serve`` and ``slurm-defrag demo``
(which hands it the simulated cluster as the backend) import this module.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from slurm_defrag.actuator.killswitch import KillSwitch
from slurm_defrag.actuator.route_file import RouteFile
from slurm_defrag.policy.file import Policy, default_policy, load_policy
from slurm_defrag.service.http import Page
from slurm_defrag.service.loop import Cycle, CycleDeps, CycleRules
from slurm_defrag.service.observer import NO_OBSERVER, ObservedSlurm
from slurm_defrag.service.preemption_history import StoreHistory
from slurm_defrag.service.prometheus import Exporter
from slurm_defrag.service.runner import Service, crash_hook
from slurm_defrag.service.settings import ServiceSettings
from slurm_defrag.slurm.backends import SlurmBackend, open_backend
from slurm_defrag.store.database import Store
from slurm_defrag.store.lease import Lease
from slurm_defrag.store.repo import Repository

ROUTE_VALID_CYCLES = 3
"""job_submit.lua stops routing by a route file this many cycles old: the service
stopped refreshing it (a late cycle or two still routes)."""


def _now() -> datetime:
    return datetime.now(UTC)


def policy_of(settings: ServiceSettings) -> Policy:
    policy = load_policy(settings.policy) if settings.policy else default_policy()
    if settings.solver is not None:
        policy = policy.model_copy(update={"solver": settings.solver})
    return policy


def build(
    settings: ServiceSettings,
    *,
    backend: SlurmBackend | None = None,
    clock: Callable[[], datetime] | None = None,
) -> tuple[Service, Store]:
    """Everything the service needs, opened and checked (schema, policy) before it starts.

    ``backend``: a Slurm backend built by the caller instead of the one ``settings.slurm``
    names (``slurm-defrag demo``: the simulated cluster, :mod:`slurm_defrag.demo`), and
    ``clock``: the time the cycle acts by (the demo's simulated time; default the wall
    clock). Everything else is built as for ``serve``.
    """
    store = Store.open(settings.db_url)
    if backend is None:
        backend = open_backend(settings.slurm)
    lease = Lease(store, settings.holder_id, ttl_s=settings.lease_ttl_s)
    repo = Repository(store)
    history = StoreHistory(repo.plans)  # the limits' count, also exported by /metrics
    # /metrics is the exporter's only reader: without the HTTP endpoint it would only
    # wrap Slurm and count preemptions every cycle for nobody.
    exporter = Exporter(history) if settings.metrics and settings.http_port else None
    if exporter is not None:  # count Slurm errors (and unreadable records) where reads pass
        backend = ObservedSlurm(backend, exporter.slurm_error, exporter.unreadable_jobs)
    route = (
        RouteFile(settings.route_file, valid_s=ROUTE_VALID_CYCLES * settings.interval_s)
        if settings.route_file is not None
        else None
    )
    cycle = Cycle(
        CycleDeps(
            backend, backend, repo, lease, KillSwitch(settings.kill_switch_file), history, route
        ),
        CycleRules(
            settings.mode,
            policy_of(settings),
            settings.plan_ttl_s,
            settings.packing_weight_bump if settings.packing else None,
            packing_lever=settings.packing_lever,
        ),
        hook=crash_hook(settings.test_crash_after),
        observer=exporter or NO_OBSERVER,
        clock=clock or _now,
    )
    pages: dict[str, Page] = {}
    if exporter is not None:
        pages["/metrics"] = exporter.page
    if settings.web:  # the read-only page over the database this service writes
        from slurm_defrag.web.pages import web_pages
        from slurm_defrag.web.sources import StoreSource

        pages.update(web_pages(StoreSource(store)))
    service = Service(settings, cycle, lease, pages=pages)
    if exporter is not None:
        exporter.watch(service)
    return service, store
