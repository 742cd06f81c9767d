"""Benchmark: a time-compressed slice of openb on the 128-node Slurm, then in the simulator.

    python bench/slurm_replay_bench.py sequence OUT/seq.json  # the arrival sequence only
    python bench/slurm_replay_bench.py run plain|one OUT/DIR  # up, replay, sacct, down
    python bench/slurm_replay_bench.py compare OUT/plain      # the simulator on the same jobs
    python bench/slurm_replay_bench.py up|down                # only the cluster (run --reuse)

Issue #41 item 5 ("Sim against real Slurm at scale"). The sequence is Protocol B's: jobs
drawn from openb's ``multigpu50`` pod list (a share of a GPU asks for one whole GPU: the
cluster has no shards), run times clipped at MaxTime 6 h, time limits as users set them,
Poisson arrivals at ``--load`` x the cluster's 1024 GPUs. Alone, a few hundred jobs never
fill 1024 GPUs (they are mostly 1-GPU jobs of minutes), so the slice starts warm, as
Protocol B measures after its warm-up: the jobs of the stream still running at the slice's
start (had each started when it arrived) are submitted first, with what is left of their
run and limit; then the ``--jobs`` arrivals after it, each at its own time. Time is
compressed ``--factor`` times (30: 1 trace hour = 2 minutes); run times are whole seconds
of ``sleep`` and limits whole minutes (Slurm's unit), at least the run + 5 s.

``run`` brings the cluster of ``bench/slurm_scale_bench.py`` up (128 nodes x 8 fake GPUs,
scheduler passes every ``SCHED_S`` s), submits the sequence from inside slurmctld at its
times (``sbatch`` as alice, bob and carol, round robin), waits for the queue to drain,
writes ``sacct.txt`` (``-X -D -P``), ``sacct.json``, ``snapshot.json``, the scheduler
configuration, ``sdiag`` and the sequence to OUT, and takes the cluster down (``--keep``:
not). Mode ``plain``: first fit by Weight as slurm.conf stands (all nodes equal). Mode
``one``: the one configuration (docs/benchmarks.md): job_submit.lua with the table of
``plugins render`` + ``RENDER`` (its short-first span, a week of time limits, divided by the
factor like every other time: 1-13 minute limits on a week's span all round to one boost),
and the service beside slurmctld in enforce mode every ``SERVICE_S`` s, as root, with the
``shape-weights`` lever and examples/policy-large-jobs.toml, every time in it divided by
the factor (:func:`policy_toml`); its log is kept as ``service.log``.

``compare`` replays OUT's sacct on OUT's snapshot in the simulator (``run_b_site``: every
job at its recorded submit, run time and limit), in trace time (every time x the factor,
Slurm's intervals and the service's cycle too, so the planner sees the hours it was tuned
for), with slurmctld's backfill model (``bf_reserve="all"``) and ``--main-gap`` (slurmctld's
``sched_min_interval``: at most one main pass per 2 s by default; 0: a pass at every event,
the simulator's old model), and prints the per-job start-time error (in scheduling cycles)
and the tail report (mean/p50/p95/p99 wait, mean wait per time-limit quartile and GPU class)
real vs simulated, over the jobs of the slice (the warm jobs are not measured). ``--json``
writes it. For mode ``one``: ``--profile examples/profiles/one-configuration.toml``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent)]

import repo_traces  # noqa: F401,E402  (sets SLURM_DEFRAG_TRACES for a checkout)
import slurm_scale_bench as scale  # noqa: E402
from slurm_defrag.domain.units import MILLI  # noqa: E402
from slurm_defrag.packing.node_levers import SHORT_FIRST_SPAN  # noqa: E402
from slurm_defrag.sim.configuration import PlacementConfig, from_profile  # noqa: E402
from slurm_defrag.sim.engine import Engine, EngineConfig  # noqa: E402
from slurm_defrag.sim.model import JobSpec, NodeSpec  # noqa: E402
from slurm_defrag.sim.planner_step import make_step  # noqa: E402
from slurm_defrag.sim.profile import load_profile  # noqa: E402
from slurm_defrag.sim.protocol_b import SettingsB, run_b_site  # noqa: E402
from slurm_defrag.sim.timed_workload import (  # noqa: E402
    arrival_rate,
    arrivals,
    durations_by_gpus,
    job_pool,
    user_time_limit,
)
from slurm_defrag.sim.wait_classes import Tail, class_means  # noqa: E402
from slurm_defrag.traces import openb  # noqa: E402

USERS = ("alice", "bob", "carol")
MAX_RUNTIME = 6 * 3600.0
SCHED_S = 2
"""sched_interval and bf_interval (s): one scheduling cycle of the compressed run."""
BF_RESOLUTION_S = 5
"""bf_resolution (s; default 60 s would be 30 trace minutes at factor 30)."""
SCHEDULER_PARAMETERS = (
    f"SchedulerParameters=sched_interval={SCHED_S},bf_interval={SCHED_S},"
    f"bf_resolution={BF_RESOLUTION_S},bf_max_job_test=500"
)
SERVICE_S = 5
"""The service's cycle (interval_s) in mode ``one``, real seconds."""
LEAD_S = 60
"""Real seconds between the start of the warm jobs' submission and the slice's time 0."""
MARGIN_S = 5
"""A limit is at least the run + this (a sleep of exactly its limit may be killed)."""
FIELDS = (
    "JobID,JobName,User,Account,Partition,QOS,State,Submit,Start,End,Elapsed,Timelimit,"
    "NNodes,AllocCPUS,ReqCPUS,AllocTRES,ReqTRES,ReqMem,ExitCode"
)
NAME = "replay"


@dataclass(frozen=True)
class ReplayJob:
    """One ``sbatch``: at ``offset_s`` real seconds after the submitter starts."""

    name: str
    offset_s: float
    run_s: int
    limit_min: int
    gpus: int
    user: str
    warm: bool


# -- the sequence ---------------------------------------------------------------------------


def _pool(variant: str) -> list[JobSpec]:
    """openb GPU jobs with run times; a GPU share asks for one whole GPU."""
    jobs = openb.load_pods(variant)
    if not any(j.duration for j in jobs):
        reference = openb.load_pods("default")
        jobs = durations_by_gpus(jobs, reference, np.random.default_rng(0))
    whole = [replace(j, gpu_milli=MILLI) for j in jobs if j.num_gpu > 0]
    return job_pool(whole, MAX_RUNTIME)


def _real(job: JobSpec, offset: float, run: float, limit: float, factor: float) -> ReplayJob:
    run_s = max(1, round(run / factor))
    limit_min = max(1, math.ceil(limit / factor / 60), math.ceil((run_s + MARGIN_S) / 60))
    return ReplayJob(job.name, round(offset, 3), run_s, limit_min, job.num_gpu, "", False)


def sequence(
    seed: int, n_jobs: int, load: float, factor: float, variant: str, gpus: int
) -> list[ReplayJob]:
    """The warm jobs (offset 0, in arrival order), then ``n_jobs`` arrivals of the slice."""
    rng = np.random.default_rng(seed)
    pool = _pool(variant)
    rate = arrival_rate(pool, gpus * MILLI, load)
    t0 = MAX_RUNTIME  # one maximal run time of arrivals before the slice: a steady state
    horizon = t0 + 2 * n_jobs / rate
    stream = arrivals(pool, rate, horizon, rng)
    side = np.random.default_rng([seed, 14])
    limits = [user_time_limit(j.duration, MAX_RUNTIME, side) for j in stream]
    out: list[ReplayJob] = []
    for j, limit in zip(stream, limits, strict=True):
        if j.submit < t0 < j.submit + j.duration:
            left = j.submit + j.duration - t0
            out.append(replace(_real(j, 0.0, left, limit - (t0 - j.submit), factor), warm=True))
    slice_ = [(j, lim) for j, lim in zip(stream, limits, strict=True) if j.submit >= t0]
    for j, limit in slice_[:n_jobs]:
        out.append(_real(j, LEAD_S + (j.submit - t0) / factor, j.duration, limit, factor))
    return [replace(r, name=f"{NAME}{i}", user=USERS[i % 3]) for i, r in enumerate(out)]


def _describe(seq: list[ReplayJob], gpus: int) -> str:
    warm = [r for r in seq if r.warm]
    live = [r for r in seq if not r.warm]
    span = max(r.offset_s for r in live) - LEAD_S
    work = sum(r.gpus * r.run_s for r in live)
    return (
        f"{len(warm)} warm jobs ({sum(r.gpus for r in warm)} GPUs), {len(live)} slice jobs "
        f"over {span:.0f} s (offered {work / (gpus * span):.2f}x of {gpus} GPUs), runs "
        f"{min(r.run_s for r in seq)}-{max(r.run_s for r in seq)} s, limits "
        f"{min(r.limit_min for r in seq)}-{max(r.limit_min for r in seq)} min"
    )


# -- the live run ---------------------------------------------------------------------------


RENDER = ("--short-first", "0.1", "--short-first-all", "--large-first", "4", "--keep-scarce", "0.5")
"""The one configuration's job_submit.lua table (docs/benchmarks.md, "One configuration")."""
HOOK_FILES = ("job_submit.lua", "defrag_nodes.lua")


def _configure(nodes: int, mode: str, factor: float) -> None:
    """The scale cluster's files, with this bench's scheduler passes; mode ``one`` adds
    job_submit.lua and its table rendered from the same slurm.conf (mounted beside it),
    its short-first span (a week of time limits) compressed as the run is: a week's boost
    spread over 1-13 minute limits would round every one to the same priority."""
    scale.generate(nodes)
    conf = scale.SCALE_DIR / "slurm.conf"
    lines = [
        SCHEDULER_PARAMETERS if line.startswith("SchedulerParameters=") else line
        for line in conf.read_text().splitlines()
    ]
    if mode == "one":
        lines.append("JobSubmitPlugins=lua")
    conf.write_text("\n".join(lines) + "\n")
    if mode != "one":
        return
    (scale.SCALE_DIR / "job_submit.lua").write_bytes(
        (scale.ROOT / "slurm-plugins" / "job_submit.lua").read_bytes()
    )
    table = scale.SCALE_DIR / "defrag_nodes.lua"
    argv = [sys.executable, "-m", "slurm_defrag.cli", "plugins", "render", "--slurm-conf",
            str(conf), "--gres-conf", str(scale.SCALE_DIR / "gres.conf"), "-o", str(table),
            *RENDER]  # fmt: skip
    subprocess.run(argv, check=True, timeout=300)
    span = f"span = {SHORT_FIRST_SPAN},"
    text = table.read_text()
    assert span in text, f"no {span!r} in {table}"
    table.write_text(text.replace(span, f"span = {round(SHORT_FIRST_SPAN / factor)},"))
    override = scale.SCALE_DIR / "compose.override.yml"
    mounts = "".join(f"      - {scale.SCALE_DIR / f}:/etc/slurm/{f}:ro\n" for f in HOOK_FILES)
    text = override.read_text().replace(
        "  slurmctld:\n    volumes:\n", "  slurmctld:\n    volumes:\n" + mounts, 1
    )
    override.write_text(text)


def policy_toml(factor: float) -> str:
    """examples/policy-large-jobs.toml (the one configuration's ``[defrag]``) with every
    time in it divided by ``factor``, and the per-user limits off as the simulator has them."""
    return f"""version = 1
[protections]
extra = ["large-job"]
large_job_gpus = 4
min_runtime_minutes = {10 / factor!r}
[limits]
max_gpu_hours_lost_per_plan = {4 / factor!r}
max_preemptions_per_user_per_day = "unlimited"
max_gpu_hours_lost_per_user_per_day = "unlimited"
max_requeues_for_user_per_day = "unlimited"
max_gpu_hours_lost_for_user_per_day = "unlimited"
[cost]
requeue_wait_weight = 1.0
target_wait_weight = 1.0
restart_cost_gpu_hours = {0.1 / factor!r}
max_wait_hours = {24 / factor!r}
[drain]
max_wait_hours = {0.5 / factor!r}
[[strategies]]
name = "free-nvlink-block"
[strategies.args]
min_gpus_per_node = 4
"""


def _service_name(env: dict[str, str]) -> str:
    return f"{env['CLUSTER_PREFIX']}-{env['SLURM_SUITE']}-defrag-replay"


def start_service(env: dict[str, str], factor: float) -> None:
    """The service in enforce mode beside slurmctld (its network namespace, as deployed),
    root (it sets Weights), the shape-weights lever, the time-scaled planner policy."""
    policy = scale.SCALE_DIR / "replay-policy.toml"
    policy.write_text(policy_toml(factor))
    settings = {
        "MODE": "enforce",
        "INTERVAL_S": str(SERVICE_S),
        "PLAN_TTL_S": str(900 / factor),
        "PACKING": "true",
        "PACKING_LEVER": "shape-weights",
        "POLICY": "/etc/slurm-defrag/replay-policy.toml",
    }
    argv = [scale.DOCKER, "run", "-d", "--name", _service_name(env),
            "--network", f"container:{scale._ctld(env)}", "-e", "DEFRAG_USER=root"]  # fmt: skip
    for f in ("slurm.conf", "gres.conf", "topology.conf"):
        argv += ["-v", f"{scale.SCALE_DIR / f}:/etc/slurm/{f}:ro"]
    argv += ["-v", f"{policy}:/etc/slurm-defrag/replay-policy.toml:ro"]
    for key, value in settings.items():
        argv += ["-e", f"SLURM_DEFRAG_{key}={value}"]
    argv.append(f"slurm-defrag/defrag:{env['SLURM_SUITE']}")
    subprocess.run([scale.DOCKER, "rm", "-f", _service_name(env)], capture_output=True)
    subprocess.run(argv, check=True, capture_output=True)
    for _ in range(60):
        if "cycle" in _service_logs(env):
            return
        time.sleep(2)
    print(f"warning: no cycle logged within 120 s:\n{_service_logs(env)[-3000:]}")


def _service_logs(env: dict[str, str]) -> str:
    proc = subprocess.run(
        [scale.DOCKER, "logs", _service_name(env)], capture_output=True, text=True, check=False
    )
    return proc.stdout + proc.stderr


def stop_service(env: dict[str, str], out: Path) -> None:
    (out / "service.log").write_text(_service_logs(env))
    subprocess.run([scale.DOCKER, "stop", "-t", "30", _service_name(env)], capture_output=True)
    subprocess.run([scale.DOCKER, "rm", "-f", _service_name(env)], capture_output=True)


SUBMITTER = r"""
set -u
t0=$(date +%s%N)
fail=0
while read -r off_ms user gpus lim run name; do
  now=$(date +%s%N)
  left=$(( off_ms - (now - t0) / 1000000 ))
  if [ "$left" -gt 0 ]; then sleep "$(printf '%d.%03d' $((left / 1000)) $((left % 1000)))"; fi
  runuser -u "$user" -- sbatch -Q -J "$name" -N1 --gres=gpu:"$gpus" -c1 --mem=100 \
    -t "$lim" -o /dev/null --wrap "sleep $run" >/dev/null || fail=$((fail + 1))
done < /jobs/replay.txt
late=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "submitted; last at ${late} ms; ${fail} refused"
"""


def _submit(env: dict[str, str], seq: list[ReplayJob]) -> None:
    rows = [
        f"{round(r.offset_s * 1000)} {r.user} {r.gpus} {r.limit_min} {r.run_s} {r.name}"
        for r in sorted(seq, key=lambda r: r.offset_s)
    ]
    local = scale.SCALE_DIR / "replay.txt"
    local.write_text("\n".join(rows) + "\n")
    subprocess.run(
        [scale.DOCKER, "cp", str(local), f"{scale._ctld(env)}:/jobs/replay.txt"], check=True
    )
    t0 = time.monotonic()
    print(scale._sh(env, SUBMITTER, timeout=3600).strip(), f"({time.monotonic() - t0:.0f} s)")


def _drain(env: dict[str, str], timeout_s: float) -> None:
    t0 = time.monotonic()
    while True:
        states = scale._sh(env, "squeue -h -o %T | sort | uniq -c").split()
        left = sum(int(n) for n in states[0::2])
        if not left:
            print(f"queue empty after {time.monotonic() - t0:.0f} s more")
            return
        if time.monotonic() - t0 > timeout_s:
            sys.exit(f"still {left} jobs queued after {timeout_s:.0f} s")
        print(f"{time.monotonic() - t0:5.0f} s: {' '.join(states)}", flush=True)
        time.sleep(30)


def _dump(env: dict[str, str], out: Path, since: str) -> None:
    """sacct (text and JSON), the node inventory, the scheduler configuration and sdiag."""
    time.sleep(5)  # slurmdbd takes the last records
    tz = "TZ=UTC "
    text = scale._sh(env, f"{tz}sacct -a -X -D -P -o {FIELDS} -S {since}")
    (out / "sacct.txt").write_text(text)
    (out / "sacct.json").write_text(scale._sh(env, f"{tz}sacct -a -X -D --json -S {since}"))
    conf = scale._sh(env, "scontrol show config")
    keep = ("SchedulerParameters", "SelectType", "PriorityType", "SLURM_VERSION", "JobSubmit")
    (out / "config.txt").write_text(
        "".join(line + "\n" for line in conf.splitlines() if line.startswith(keep))
    )
    (out / "sdiag.txt").write_text(scale._sh(env, "sdiag"))  # scheduler cycle times
    os.environ.update({k: env[k] for k in ("SLURM_SUITE", "CLUSTER_PREFIX")})
    sys.path.insert(0, str(scale.ROOT / "tests" / "e2e"))
    from live_cluster import cli_backend

    (out / "snapshot.json").write_text(cli_backend().snapshot().model_dump_json(indent=1))


def run(args: argparse.Namespace) -> None:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    seq = sequence(args.seed, args.jobs, args.load, args.factor, args.variant, args.nodes * 8)
    (out / "sequence.json").write_text(json.dumps([asdict(r) for r in seq], indent=0))
    params = {k: getattr(args, k) for k in ("mode", "seed", "jobs", "load", "factor", "variant")}
    (out / "params.json").write_text(json.dumps(params))
    print(_describe(seq, args.nodes * 8))
    _configure(args.nodes, args.mode, args.factor)
    env = scale._env()
    if not args.reuse:
        subprocess.run([str(scale.ROOT / "scripts" / "cluster.sh"), "up"], env=env, check=True)
    scale._wait_nodes(env, args.nodes)
    if scale._sh(env, "squeue -h | wc -l").strip() != "0":
        sys.exit("the cluster holds jobs: cancel them first")
    if args.mode == "one":
        start_service(env, args.factor)
    since = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    t0 = time.monotonic()
    _submit(env, seq)
    _drain(env, 3600)
    print(f"run took {time.monotonic() - t0:.0f} s")
    if args.mode == "one":
        stop_service(env, out)
    _dump(env, out, since)
    (out / "README.txt").write_text(
        f"bench/slurm_replay_bench.py run {args.mode} (seed {args.seed}, {args.jobs} jobs, load "
        f"{args.load}, factor {args.factor}, {args.variant}, {args.nodes} nodes) at "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {_describe(seq, args.nodes * 8)}\n"
    )
    if not args.keep:
        scale.down(args)


def up(args: argparse.Namespace) -> None:
    """Only the cluster, as ``run`` brings it up (then ``run --reuse``)."""
    _configure(args.nodes, args.mode, args.factor)
    env = scale._env()
    subprocess.run([str(scale.ROOT / "scripts" / "cluster.sh"), "up"], env=env, check=True)
    scale._wait_nodes(env, args.nodes)


def sequence_cmd(args: argparse.Namespace) -> None:
    seq = sequence(args.seed, args.jobs, args.load, args.factor, args.variant, args.nodes * 8)
    args.out.write_text(json.dumps([asdict(r) for r in seq], indent=0))
    print(_describe(seq, args.nodes * 8))


# -- the comparison -------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """Per measured job (same order on both sides): start offset and wait, real seconds."""

    starts: list[float]
    waits: list[float]


def _in_trace_time(job: JobSpec, factor: float) -> JobSpec:
    limit = None if job.time_limit is None else job.time_limit * factor
    return replace(
        job, submit=job.submit * factor, duration=job.duration * factor, time_limit=limit
    )


def _sim(
    jobs: list[JobSpec],
    nodes: list[NodeSpec],
    policy: str,
    profile: Path | None,
    factor: float,
    main_gap: float = 0.0,
) -> dict[str, tuple[float, float]]:
    """Job name -> (start - submit, wait) in real seconds: the simulator runs in trace time
    (every time x ``factor``, Slurm's intervals too), so the planner and its policy see the
    hours they were tuned for; the service's cycle is ``SERVICE_S`` real seconds."""
    cfg = EngineConfig(
        bf_interval=SCHED_S * factor,
        bf_max_job_test=500,
        bf_reserve="all",
        bf_resolution=BF_RESOLUTION_S * factor,
        lever_interval=SERVICE_S * factor,
        defrag_interval=SERVICE_S * factor,
        sched_min_interval=main_gap * factor,
    )
    traced = [_in_trace_time(j, factor) for j in jobs]
    span = max(j.submit for j in traced)
    settings = SettingsB(load=0.0, horizon=span + 1.0, warmup=0.0, engine=cfg)
    seen: list[Engine] = []
    if profile is not None:
        config = from_profile(load_profile(profile))
        placement: PlacementConfig | str = config.placement
        step = make_step(config.step, config.limits)
    else:
        placement, step = policy, make_step("none")
    run_b_site(nodes, traced, placement, 42, settings, step, on_engine=seen.append)
    engine = seen[0]
    out = {}
    for j, rec in zip(engine.jobs, engine.stats.records, strict=True):
        assert rec.first_start is not None, j.name
        assert rec.end is not None, j.name
        out[j.name] = (
            (rec.first_start - j.submit) / factor,
            (rec.end - j.submit - j.duration) / factor,
        )
    return out


def _row(name: str, real: float, sim: float) -> str:
    ratio = sim / real if real else (1.0 if not sim else math.inf)
    return f"{name:<16} {real:9.1f} {sim:9.1f}   {ratio:6.2f}"


def compare(args: argparse.Namespace) -> None:
    from slurm_defrag.domain.cluster import ClusterSnapshot
    from slurm_defrag.slurm.parse.sacct import read_site_jobs
    from slurm_defrag.traces.site import site_workload

    folder: Path = args.out
    factor = json.loads((folder / "params.json").read_text())["factor"]
    read = read_site_jobs(folder / "sacct.txt")
    snap = ClusterSnapshot.model_validate_json((folder / "snapshot.json").read_text())
    site = site_workload(read.jobs, snap)
    warm = {r["name"] for r in json.loads((folder / "sequence.json").read_text()) if r["warm"]}
    jobname = _job_names(folder / "sacct.txt")
    accounted = {j.job_id: j for j in read.jobs}
    first_start = _first_starts(folder / "sacct.txt")
    measured = [j for j in site.jobs if jobname[j.name] not in warm]
    real = Side(
        [first_start[j.name] - site.first_submit_t - j.submit for j in measured],
        [accounted[j.name].start_t - site.first_submit_t - j.submit for j in measured],
    )
    simulated = _sim(site.jobs, site.nodes, args.policy, args.profile, factor, args.main_gap)
    sim = Side([simulated[j.name][0] for j in measured], [simulated[j.name][1] for j in measured])
    err = np.abs(np.asarray(real.starts) - np.asarray(sim.starts))
    lines = [
        f"{folder}: {len(site.jobs)} jobs replayed ({len(measured)} measured, the rest warm) "
        f"on {len(site.nodes)} nodes; simulator {args.profile or args.policy} in trace time "
        f"(x{factor:g}), main passes {args.main_gap:g} s apart; skipped {read.skipped}",
        f"start time |real - sim|: median {np.median(err):.1f} s = {np.median(err) / SCHED_S:.2f} "
        f"cycles of {SCHED_S} s; p90 {np.percentile(err, 90):.1f} s; mean {err.mean():.1f} s; "
        f"within one cycle {np.mean(err <= SCHED_S) * 100:.0f} %",
        f"{'wait (real s)':<16} {'real':>9} {'sim':>9}   sim/real",
    ]
    rt, st = Tail.of(real.waits), Tail.of(sim.waits)
    for key in ("mean", "p50", "p95", "p99", "max"):
        lines.append(_row(key, getattr(rt, key), getattr(st, key)))
    rc, counts = class_means(measured, real.waits)
    sc, _ = class_means(measured, sim.waits)
    for key in rc:
        if not key.startswith("user "):
            lines.append(_row(f"{key} ({counts[key]})", rc[key], sc[key]))
    print("\n".join(lines))
    if args.json:
        doc = {
            "folder": str(folder),
            "policy": args.policy,
            "profile": str(args.profile) if args.profile else None,
            "main_gap_s": args.main_gap,
            "factor": factor,
            "jobs": len(site.jobs),
            "measured": len(measured),
            "cycle_s": SCHED_S,
            "start_abs_err_s": {
                "median": float(np.median(err)),
                "p90": float(np.percentile(err, 90)),
                "mean": float(err.mean()),
            },
            "real": {"tail": asdict(rt), "classes": rc},
            "sim": {"tail": asdict(st), "classes": sc},
            "class_jobs": counts,
        }
        args.json.write_text(json.dumps(doc, indent=1))


def _first_starts(path: Path) -> dict[str, float]:
    """JobID -> the earliest Start of ``sacct -D -P`` text (a requeued job's first run)."""
    lines = path.read_text().splitlines()
    head = lines[0].split("|")
    jid, start = head.index("JobID"), head.index("Start")
    out: dict[str, float] = {}
    for line in lines[1:]:
        f = line.split("|")
        if len(f) > start and f[start][:1].isdigit():  # not "Unknown" / "None"
            t = datetime.fromisoformat(f[start]).replace(tzinfo=UTC).timestamp()
            out[f[jid]] = min(out.get(f[jid], t), t)
    return out


def _job_names(path: Path) -> dict[str, str]:
    """JobID -> JobName of ``sacct -P`` text."""
    lines = path.read_text().splitlines()
    head = lines[0].split("|")
    jid, jname = head.index("JobID"), head.index("JobName")
    return {f[jid]: f[jname] for f in (line.split("|") for line in lines[1:]) if len(f) > jname}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    sub = ap.add_subparsers(dest="action", required=True)
    for name in ("sequence", "run"):
        p = sub.add_parser(name)
        if name == "run":
            p.add_argument("mode", choices=("plain", "one"))
            p.add_argument("--reuse", action="store_true", help="the cluster is up already")
            p.add_argument("--keep", action="store_true", help="leave the cluster up")
        p.add_argument("out", type=Path)
        p.add_argument("--seed", type=int, default=41)
        p.add_argument("--jobs", type=int, default=450, help="arrivals in the slice")
        p.add_argument("--load", type=float, default=1.1)
        p.add_argument("--factor", type=float, default=30.0, help="trace s per real s")
        p.add_argument("--variant", default="multigpu50", help="openb pod list")
        p.add_argument("--nodes", type=int, default=128)
    p = sub.add_parser("compare")
    p.add_argument("out", type=Path)
    p.add_argument("--policy", default="first-fit", help="a placement policy, without --profile")
    p.add_argument(
        "--profile", type=Path, default=None, help="the simulator's configuration (a profile)"
    )
    p.add_argument(
        "--main-gap",
        type=float,
        default=2.0,
        help="real s between main passes (sched_min_interval, Slurm's default 2; 0: at once)",
    )
    p.add_argument("--json", type=Path)
    p = sub.add_parser("up")
    p.add_argument("mode", choices=("plain", "one"))
    p.add_argument("--nodes", type=int, default=128)
    p.add_argument("--factor", type=float, default=30.0, help="trace s per real s")
    sub.add_parser("down")
    args = ap.parse_args()
    actions = {"sequence": sequence_cmd, "run": run, "compare": compare, "up": up}
    actions["down"] = scale.down
    actions[args.action](args)


if __name__ == "__main__":
    main()
