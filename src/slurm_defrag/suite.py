"""Whole experiments: load the trace, apply the overlay, run a grid, as the CLI and bench do.

The one module that joins :mod:`slurm_defrag.traces` (files -> simulator specs) and
:mod:`slurm_defrag.sim` (the simulator): it sits above both, so the trace loaders may
import the simulator's model without the simulator importing the loaders back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path

import numpy as np
from rich.console import Console

from slurm_defrag.domain.units import MILLI
from slurm_defrag.errors import InputError
from slurm_defrag.sim.defrag import DefragStep
from slurm_defrag.sim.engine import EngineConfig
from slurm_defrag.sim.experiment import run_grid
from slurm_defrag.sim.model import JobSpec, NodeSpec
from slurm_defrag.sim.planner_step import make_step
from slurm_defrag.sim.protocol_a import ResultA, run_a
from slurm_defrag.sim.protocol_b import ResultB, SettingsB, run_b, run_b_site
from slurm_defrag.sim.timed_workload import durations_by_gpus, scale_cluster
from slurm_defrag.traces import openb
from slurm_defrag.traces.overlay import apply_overlay, require_nvlink
from slurm_defrag.traces.site import SiteWorkload

DEFAULT_POLICIES = ("random", "first-fit", "best-fit", "dot-product", "fgd", "packing")


@dataclass(frozen=True)
class Suite:
    trace: str = "default"
    node_list: str = "gpu"
    overlay: str = "none"
    nvlink_jobs: bool = False
    policies: Sequence[str] = DEFAULT_POLICIES
    seeds: Sequence[int] = tuple(range(42, 52))
    defrag: Sequence[str] = ("none",)
    # Protocol A
    ratio: float = 1.3
    shuffle: bool = True
    requeue_cap: str = "step"
    # Protocol B
    loads: Sequence[float] = (0.9, 1.2, 1.5)
    scale: float = 0.125
    horizon_h: float = 18.0
    warmup_h: float = 6.0
    max_runtime_h: float = 6.0
    user_limits: bool = False
    ckpt_shares: Sequence[float] = (0.0,)
    backfill: str = "head"
    """``head``: EASY (only the blocked head job is planned); ``all``: as slurmctld's
    sched/backfill plans every job it tests, whole nodes, ``bf_resolution`` 60 s (the
    model the real-Slurm cross-check validated; :mod:`slurm_defrag.sim.backfill`)."""
    priority: str = "none"
    """Protocol B's priority policy: ``none`` (every job equal, first come first served)
    or a :data:`~slurm_defrag.sim.site_priority.PRESETS` name (priority/multifactor)."""
    whole_cpus: bool = False
    """Every job's CPUs rounded up to whole CPUs, as Slurm allocates them: openb's pods
    ask for fractions of a CPU (Kubernetes millicores), which the simulator otherwise
    allocates as asked, something no Slurm selection does."""
    extra: dict[str, object] = field(default_factory=dict)

    def settings(self) -> dict[str, object]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def load(suite: Suite, traces: Path | None = None) -> tuple[list[NodeSpec], list[JobSpec]]:
    """The suite's cluster and jobs; ``traces`` is the trace folder (default: the env var)."""
    nodes = apply_overlay(openb.load_nodes(suite.node_list, traces), suite.overlay)
    jobs = openb.load_pods(suite.trace, traces)
    if suite.whole_cpus:
        jobs = [replace(j, cpu_milli=-(-j.cpu_milli // MILLI) * MILLI) for j in jobs]
    return nodes, require_nvlink(jobs) if suite.nvlink_jobs else jobs


BACKFILL = ("head", "all")


def engine_config(backfill: str) -> EngineConfig:
    """The engine for a backfill model (see :attr:`Suite.backfill`)."""
    if backfill == "head":
        return EngineConfig()
    if backfill == "all":
        # slurm.conf defaults: bf_resolution=60, bf_max_job_test=500 (100 keeps the grid
        # affordable; Protocol B's queue rarely holds more large jobs than that)
        return EngineConfig(bf_reserve="all", bf_resolution=60.0)
    raise InputError(f"--backfill {backfill!r}: choose from {', '.join(BACKFILL)}")


def _steps(suite: Suite) -> list[DefragStep]:
    return [make_step(name) for name in suite.defrag]


def protocol_a(
    suite: Suite, console: Console | None = None, traces: Path | None = None
) -> list[ResultA]:
    nodes, jobs = load(suite, traces)
    steps = _steps(suite)
    tasks, labels = [], []
    for step in steps:
        for policy in suite.policies:
            for seed in suite.seeds:
                tasks.append(
                    partial(
                        run_a,
                        nodes,
                        jobs,
                        policy,
                        seed,
                        suite.ratio,
                        suite.shuffle,
                        step,
                        suite.requeue_cap,
                    )
                )
                labels.append(f"A {policy} defrag={step.name} seed={seed}")
    return run_grid(tasks, labels, console)


def protocol_b(
    suite: Suite,
    console: Console | None = None,
    traces: Path | None = None,
    on_result: Callable[[str, ResultB], None] | None = None,
) -> list[ResultB]:
    nodes, jobs = load(suite, traces)
    if jobs and not any(j.duration for j in jobs):
        # openb's multigpu* files carry no times: run times from the default trace's, per
        # GPU count (timed_workload.durations_by_gpus), from a fixed seed
        reference = openb.load_pods("default", traces)
        jobs = durations_by_gpus(jobs, reference, np.random.default_rng(0))
    nodes = scale_cluster(nodes, suite.scale)
    base = SettingsB(
        horizon=suite.horizon_h * 3600,
        warmup=suite.warmup_h * 3600,
        max_runtime=suite.max_runtime_h * 3600,
        engine=engine_config(suite.backfill),
        user_limits=suite.user_limits,
        priority=suite.priority,
    )
    tasks, labels = [], []
    for step in _steps(suite):
        for load_ in suite.loads:
            for ckpt in suite.ckpt_shares:
                for policy in suite.policies:
                    for seed in suite.seeds:
                        s = replace(base, load=load_, ckpt_share=ckpt)
                        tasks.append(partial(run_b, nodes, jobs, policy, seed, s, step))
                        labels.append(
                            f"B load={load_} ckpt={ckpt} {policy} defrag={step.name} seed={seed}"
                        )
    return run_grid(tasks, labels, console, on_result)


def protocol_b_site(
    suite: Suite,
    site: SiteWorkload,
    console: Console | None = None,
    on_result: Callable[[str, ResultB], None] | None = None,
) -> list[ResultB]:
    """Protocol B on a site's own jobs and nodes (:mod:`slurm_defrag.traces.site`): every
    job replayed at its own submit time; jobs submitted in the first ``warmup_h`` hours
    are not measured, every later one is. ``loads``, ``scale`` and ``trace`` do not apply;
    the result's load is the offered load the jobs make on the inventory."""
    settings = site_settings(suite, site)
    tasks, labels = [], []
    for step in _steps(suite):
        for ckpt in suite.ckpt_shares:
            for policy in suite.policies:
                for seed in suite.seeds:
                    s = replace(settings, ckpt_share=ckpt)
                    tasks.append(partial(run_b_site, site.nodes, site.jobs, policy, seed, s, step))
                    labels.append(f"B site ckpt={ckpt} {policy} defrag={step.name} seed={seed}")
    return run_grid(tasks, labels, console, on_result)


def site_settings(suite: Suite, site: SiteWorkload) -> SettingsB:
    """Protocol B's settings for a site's workload; :class:`InputError` for options it
    cannot take (checked before any run)."""
    if suite.priority != "none":
        raise InputError(
            f"--priority {suite.priority}: a site's own workload runs with none only (the "
            "site presets model the seeded users of the openb runs)"
        )
    warmup = suite.warmup_h * 3600
    if warmup >= site.span_s:
        raise InputError(
            f"--warmup-h {suite.warmup_h:g}: the accounting's submits span "
            f"{site.span_s / 3600:.2f} h; nothing would be measured (give a smaller --warmup-h)"
        )
    settings = SettingsB(
        load=round(site.offered_load, 2),
        horizon=site.span_s + 1.0,
        warmup=warmup,
        max_runtime=max(j.duration for j in site.jobs),
        engine=engine_config(suite.backfill),
        user_limits=any(j.time_limit is not None for j in site.jobs),
        priority=suite.priority,
    )
    return settings
