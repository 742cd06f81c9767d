"""Protocol B: timed replay with departures at a chosen offered load.

Jobs arrive as a Poisson stream (:mod:`slurm_defrag.sim.timed_workload`) for ``horizon``
seconds; the simulation then runs until every job has ended, so every wait is complete.
Figures count jobs submitted in [``warmup``, ``horizon``) and the allocation over that
window:

* wait of a job = end - submit - run time: time spent not running productively (queueing,
  plus the time lost to requeues);
* large jobs ask for at least ``LARGE_GPUS`` GPUs;
* GPU allocation = time-averaged allocated milli-GPUs / capacity over the window;
* GPU-hours lost = GPUs x time run before each requeue since the job's last checkpoint;
  served = GPUs x run time of completed jobs;
* the tail and who waits (:mod:`~slurm_defrag.sim.wait_classes`): median, 95th and 99th
  percentile and largest wait, and the mean wait per class of job (time-limit quarter,
  GPU count, the ten heaviest users).

Every job has a user and an account (:mod:`~slurm_defrag.sim.population`, drawn from
their own seeded stream). With ``priority`` set (:mod:`~slurm_defrag.sim.site_priority`)
the queue is ordered by priority/multifactor with Fair Tree over them; ``none`` keeps
every job equal (first come, first served), the simulator before issue #41.

With ``user_limits`` each job gets a time limit as users set them
(:func:`~slurm_defrag.sim.timed_workload.user_time_limit`, Tsafrir, Etsion & Feitelson
2005), capped at ``max_runtime`` (MaxTime): backfill and the planner plan with it. A
``ckpt_share`` of the jobs checkpoints every 30 min. Both are drawn from their own seeded
stream, so the arrivals are the same with and without them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from slurm_defrag.errors import InputError
from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.configuration import PlacementConfig, plain
from slurm_defrag.sim.defrag import DefragStep, NoDefrag
from slurm_defrag.sim.defrag_steps import LARGE_GPUS
from slurm_defrag.sim.engine import Engine, EngineConfig, EngineStats
from slurm_defrag.sim.frag import typical_types
from slurm_defrag.sim.levers import SLURM_POLICY, SimLevers, short_first_of, with_mix
from slurm_defrag.sim.model import JobSpec, NodeSpec
from slurm_defrag.sim.placement.base import PolicyContext
from slurm_defrag.sim.placement.registry import build
from slurm_defrag.sim.population import with_owners
from slurm_defrag.sim.priority import PriorityModel
from slurm_defrag.sim.site_priority import NO_PRIORITY, POPULATION, multifactor, preset
from slurm_defrag.sim.submit_hook import SubmitHook, node_table, routed
from slurm_defrag.sim.timed_workload import (
    CKPT_INTERVAL_S,
    arrival_rate,
    arrivals,
    job_pool,
    with_user_limits,
)
from slurm_defrag.sim.wait_classes import Tail, class_means


@dataclass(frozen=True)
class SettingsB:
    load: float = 1.2
    horizon: float = 18 * 3600.0
    warmup: float = 6 * 3600.0
    max_runtime: float = 6 * 3600.0
    engine: EngineConfig = field(default_factory=EngineConfig)
    user_limits: bool = False
    """Time limits drawn as users set them (module docstring); False: exact run times."""
    ckpt_share: float = 0.0
    """Share of jobs that checkpoint every 30 min (needs nothing else)."""
    priority: str = NO_PRIORITY
    """The priority policy (:data:`~slurm_defrag.sim.site_priority.PRESETS`); ``none``:
    every job equal."""


@dataclass(frozen=True)
class ResultB:
    policy: str
    seed: int
    load: float
    defrag: str
    jobs: int
    large_jobs: int
    large_wait_mean_s: float
    large_wait_p95_s: float
    wait_mean_s: float
    gpu_alloc_pct: float
    requeues: int
    lost_gpu_h: float
    served_gpu_h: float
    lost_pct: float
    backfilled: int
    unfinished: int
    wall_s: float
    ckpt_share: float = 0.0
    user_limits: bool = False
    holds: int = 0
    """Reservations (drain plans) the engine set up."""
    priority: str = NO_PRIORITY
    wait_p50_s: float = 0.0
    wait_p95_s: float = 0.0
    wait_p99_s: float = 0.0
    wait_max_s: float = 0.0
    class_wait_s: dict[str, float] = field(default_factory=dict)
    """Mean wait per class of job (:mod:`~slurm_defrag.sim.wait_classes`)."""
    class_jobs: dict[str, int] = field(default_factory=dict)
    refused: int = 0
    """Jobs refused at submit: no node of the cluster could ever hold them (left out of
    every other figure; left out of the JSON when 0)."""


def run_b(
    nodes: Sequence[NodeSpec],
    trace: Sequence[JobSpec],
    policy: PlacementConfig | str,
    seed: int,
    settings: SettingsB | None = None,
    defrag: DefragStep | None = None,
) -> ResultB:
    """One timed replay; same inputs and seed give the same result. ``policy`` is a
    registered placement policy's name or a configuration (:class:`~slurm_defrag.sim.
    configuration.PlacementConfig`; its ``lever_every`` is Protocol A's: here the cycle is
    ``EngineConfig.lever_interval``)."""
    t0 = time.perf_counter()
    cfg = settings or SettingsB()
    rng = np.random.default_rng(seed)
    prio_cfg = preset(cfg.priority)
    state = ClusterState(nodes)
    pool = job_pool(trace, cfg.max_runtime)
    rate = arrival_rate(pool, state.total_gpu_milli, cfg.load)
    jobs = arrivals(pool, rate, cfg.horizon, rng)
    jobs = _with_limits(jobs, cfg, seed)
    jobs = with_owners(jobs, POPULATION, np.random.default_rng([seed, 41]))

    def model() -> PriorityModel | None:
        return None if prio_cfg is None else multifactor(prio_cfg, nodes, pool, rate, cfg.load)

    return _simulate(state, trace, jobs, policy, seed, cfg, defrag, rng, model, t0)


def run_b_site(
    nodes: Sequence[NodeSpec],
    jobs: Sequence[JobSpec],
    policy: PlacementConfig | str,
    seed: int,
    settings: SettingsB,
    defrag: DefragStep | None = None,
    on_engine: Callable[[Engine], None] | None = None,
) -> ResultB:
    """A site's own jobs replayed as they arrived (``simulate --workload sacct:FILE``):
    ``jobs`` carry their submit times (from 0), run times, time limits and owners, and
    ``nodes`` are the site's inventory; ``settings.load`` only labels the result (the
    offered load the jobs make). No Poisson draw, no drawn users or limits: the seed only
    breaks the policies' ties. ``settings.ckpt_share`` still draws checkpointing jobs;
    priority is first come, first served (``none``; the site presets model seeded users).
    ``on_engine`` gets the engine after the run (per-job start times: its ``stats.records``
    in the order of its ``jobs``; ``bench/slurm_replay_bench.py`` compares them with Slurm's)."""
    t0 = time.perf_counter()
    if settings.priority != NO_PRIORITY:
        raise InputError(
            f"priority {settings.priority!r}: a site's workload runs with none only (the "
            "presets model the seeded users of the openb runs)"
        )
    rng = np.random.default_rng(seed)
    state = ClusterState(nodes)
    out = sorted(jobs, key=lambda j: (j.submit, j.name))
    if settings.ckpt_share:
        side = np.random.default_rng([seed, 14])
        out = [
            replace(
                j, ckpt_interval=CKPT_INTERVAL_S if side.random() < settings.ckpt_share else None
            )
            for j in out
        ]
    return _simulate(
        state, jobs, out, policy, seed, settings, defrag, rng, lambda: None, t0, on_engine
    )


def _simulate(
    state: ClusterState,
    trace: Sequence[JobSpec],
    jobs: list[JobSpec],
    policy: PlacementConfig | str,
    seed: int,
    cfg: SettingsB,
    defrag: DefragStep | None,
    rng: np.random.Generator,
    model_of: Callable[[], PriorityModel | None],
    t0: float,
    on_engine: Callable[[Engine], None] | None = None,
) -> ResultB:
    """The replay itself and its figures, whatever made the jobs."""
    prio_cfg = preset(cfg.priority)
    rank = rng.permutation(state.size).astype(np.int64)
    types = typical_types(trace)
    placement = plain(policy) if isinstance(policy, str) else policy
    mode = placement.mode
    levers: Callable[[float], object] | None = None
    submit = None
    if mode is not None:
        # slurm mode: Slurm's selection; levers every cycle; job_submit.lua's --prefer
        mode = with_mix(mode, types)
        if (mode.seen_mix and not mode.lever.route) or mode.warm:
            raise InputError(
                f"{placement.name}: in Protocol B only the fgd-route levers take "
                'placement.mix = "seen" (and none "warm": the warm-up hours fill the estimate)'
            )
        levers = SimLevers(state, mode.lever).apply
        short = short_first_of(mode, prio_cfg)
        if mode.lever.route:
            levers, submit = routed(state, mode.lever, seen_mix=mode.seen_mix, short_first=short)
        elif mode.lever.features or short:
            hook = SubmitHook(node_table(state, mode.lever, short_first=short))
            jobs = [hook.apply(j) for j in jobs]
    chooser = build(SLURM_POLICY if mode else placement.policy, PolicyContext(state, types, rank))
    step = defrag or NoDefrag()
    window = (cfg.warmup, cfg.horizon)
    model = model_of()
    engine = Engine(
        state,
        jobs,
        chooser,
        rng,
        step,
        cfg.engine,
        window,
        levers=levers,
        submit=submit,
        priority=model,
    )
    stats = engine.run()
    if on_engine is not None:
        on_engine(engine)
    jobs = engine.jobs

    waits, large, measured, unfinished = _waits(jobs, stats, cfg)
    tail = Tail.of(waits)
    by_class, class_jobs = class_means(measured, waits)
    span = cfg.horizon - cfg.warmup
    return ResultB(
        policy=placement.name,
        seed=seed,
        load=cfg.load,
        defrag=step.name,
        jobs=len(waits),
        large_jobs=len(large),
        large_wait_mean_s=float(np.mean(large)) if large else 0.0,
        large_wait_p95_s=float(np.percentile(large, 95)) if large else 0.0,
        wait_mean_s=float(np.mean(waits)) if waits else 0.0,
        gpu_alloc_pct=100.0 * stats.alloc_integral / (state.total_gpu_milli * span),
        requeues=stats.requeues,
        lost_gpu_h=stats.lost_gpu_h,
        served_gpu_h=stats.served_gpu_h,
        lost_pct=100.0 * stats.lost_gpu_h / stats.served_gpu_h if stats.served_gpu_h else 0.0,
        backfilled=stats.backfilled,
        unfinished=unfinished,
        wall_s=time.perf_counter() - t0,
        ckpt_share=cfg.ckpt_share,
        user_limits=cfg.user_limits,
        holds=engine.holds_made,
        priority=cfg.priority,
        wait_p50_s=tail.p50,
        wait_p95_s=tail.p95,
        wait_p99_s=tail.p99,
        wait_max_s=tail.max,
        class_wait_s=by_class,
        class_jobs=class_jobs,
        refused=stats.refused,
    )


def _with_limits(jobs: list[JobSpec], cfg: SettingsB, seed: int) -> list[JobSpec]:
    """Users' time limits and checkpoints (their own random stream), as configured."""
    if not (cfg.user_limits or cfg.ckpt_share):
        return jobs
    side = np.random.default_rng([seed, 14])
    limited = with_user_limits(jobs, cfg.max_runtime, cfg.ckpt_share, side)
    if cfg.user_limits:
        return limited
    return [replace(j, ckpt_interval=k.ckpt_interval) for j, k in zip(jobs, limited, strict=True)]


def _waits(
    jobs: Sequence[JobSpec], stats: EngineStats, cfg: SettingsB
) -> tuple[list[float], list[float], list[JobSpec], int]:
    """(waits, waits of large jobs, the jobs measured, unfinished jobs) of the jobs
    submitted in the measured window; an unfinished job waited until the end."""
    waits: list[float] = []
    large: list[float] = []
    measured: list[JobSpec] = []
    unfinished = 0
    for job, rec in zip(jobs, stats.records, strict=True):
        if rec.refused or not cfg.warmup <= job.submit < cfg.horizon:
            continue
        if rec.end is None:
            unfinished += 1
            w = stats.end_time - job.submit
        else:
            w = rec.end - job.submit - job.duration
        waits.append(w)
        measured.append(job)
        if job.num_gpu >= LARGE_GPUS:
            large.append(w)
    return waits, large, measured, unfinished
