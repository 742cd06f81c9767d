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
from slurm_defrag.sim.configuration import PlacementConfig, RunConfig, from_profile, plain
from slurm_defrag.sim.defrag import DefragStep
from slurm_defrag.sim.defrag_steps import STEPS
from slurm_defrag.sim.engine import EngineConfig
from slurm_defrag.sim.experiment import run_grid
from slurm_defrag.sim.model import JobSpec, NodeSpec
from slurm_defrag.sim.planner_step import make_step
from slurm_defrag.sim.profile import load_profile
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
    configs: Sequence[RunConfig] = ()
    """Profiles' configurations (:func:`slurm_defrag.sim.configuration.from_profile`), each
    run as it is; when given, ``policies`` and ``defrag`` (registered names, crossed) are
    not used."""
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
        """The suite as written in results: ``policies`` and ``defrag`` are the labels of
        the runs, and each profile's typed fields follow under ``profiles``."""
        out = {
            k: list(v) if isinstance(v, tuple) else v
            for k, v in asdict(self).items()
            if k != "configs"
        }
        if self.configs:
            out["policies"] = list(dict.fromkeys(c.placement.name for c in self.configs))
            out["defrag"] = list(dict.fromkeys(c.step for c in self.configs))
            out["profiles"] = {c.placement.name: c.source for c in self.configs}
        return out


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


def policies_arg(policies: str | None, profiles: Sequence[Path]) -> tuple[str, ...]:
    """A ``--policies`` comma list; when not given, :data:`DEFAULT_POLICIES`, or none
    beside ``--profile`` files."""
    if policies is None:
        return () if profiles else DEFAULT_POLICIES
    return tuple(p.strip() for p in policies.split(",") if p.strip())


def configured(suite: Suite, profiles: Sequence[Path] = ()) -> Suite:
    """``suite`` checked, with the configurations of the ``profiles`` (files): its
    ``policies`` under its ``defrag`` steps then run as configurations too, before them.
    :class:`InputError` for an unknown name or a bad profile (before any trace loads)."""
    unknown = [d for d in suite.defrag if d not in STEPS]
    if unknown:
        raise InputError(f"--defrag: unknown {', '.join(unknown)}; choose from {', '.join(STEPS)}")
    placements = [plain(p) for p in suite.policies]  # refuses an unknown name
    if not profiles:
        return suite
    configs = [RunConfig(p, d) for d in suite.defrag for p in placements]
    configs += [from_profile(load_profile(f)) for f in profiles]
    runs = [(c.placement.name, c.step) for c in configs]
    if len(set(runs)) < len(runs):
        names = ", ".join(f"{name} ({step})" for name, step in runs)
        raise InputError(f"--profile: two runs named alike ({names}): give each a name")
    return replace(suite, configs=tuple(configs))


def _grid(suite: Suite) -> list[tuple[DefragStep, list[PlacementConfig]]]:
    """Each defrag step with the placements it runs under: a profile's own pair, or every
    ``--policies`` name under every ``--defrag`` name."""
    if suite.configs:
        return [(make_step(c.step, c.limits), [c.placement]) for c in suite.configs]
    placements = [plain(p) for p in suite.policies]
    return [(make_step(name), placements) for name in suite.defrag]


def protocol_a(
    suite: Suite, console: Console | None = None, traces: Path | None = None
) -> list[ResultA]:
    nodes, jobs = load(suite, traces)
    tasks, labels = [], []
    for step, placements in _grid(suite):
        for policy in placements:
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
                labels.append(f"A {policy.name} defrag={step.name} seed={seed}")
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
    for step, placements in _grid(suite):
        for load_ in suite.loads:
            for ckpt in suite.ckpt_shares:
                for policy in placements:
                    for seed in suite.seeds:
                        s = replace(base, load=load_, ckpt_share=ckpt)
                        tasks.append(partial(run_b, nodes, jobs, policy, seed, s, step))
                        labels.append(
                            f"B load={load_} ckpt={ckpt} {policy.name} defrag={step.name} "
                            f"seed={seed}"
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
    for step, placements in _grid(suite):
        for ckpt in suite.ckpt_shares:
            for policy in placements:
                for seed in suite.seeds:
                    s = replace(settings, ckpt_share=ckpt)
                    tasks.append(partial(run_b_site, site.nodes, site.jobs, policy, seed, s, step))
                    labels.append(
                        f"B site ckpt={ckpt} {policy.name} defrag={step.name} seed={seed}"
                    )
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
