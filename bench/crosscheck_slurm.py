"""Cross-check: the same small trace on the compose cluster's real Slurm and in the simulator.

    SLURM_SUITE=trixie SLURMRESTD_PORT=6821 POSTGRES_PORT=55442 \\
        .venv/bin/python bench/crosscheck_slurm.py [--jobs 60] [--seed 7] [--replay RUN.json]

A seeded trace of whole-GPU jobs (1/2/4/8 GPUs, any type or one of the cluster's types,
1-4 CPUs per GPU, run times of tens of seconds, Poisson arrivals) is submitted to the
cluster's slurmctld (``sbatch --wrap "sleep <run>"`` as root) while holding
:func:`exclusive_cluster`; each job's node and GPU indices are read from ``scontrol show
job -d`` as soon as it runs. The simulator then runs the jobs with the submit and run
times Slurm recorded and their time limits on the same nodes (read from ``sinfo``), with
Slurm's node choice (first fit, within the best-fitting leaf switch of ``topology/tree``:
:class:`LeafBestFit`) and slurmctld's backfill planning (every tested job planned, whole
nodes blocked, ``bf_resolution`` rounding, will-run groups: ``EngineConfig(bf_reserve=
"all")``, :mod:`slurm_defrag.sim.backfill`) at Slurm's ``bf_interval``: end to end (it
queues and backfills itself) and decision by decision (each job placed on the cluster as
Slurm had allocated it when the job started, around the plans backfill would have made
then for the jobs still waiting ahead of it). Printed:
the share of jobs on the same node and on the same node and GPU indices, and every job
that differs. The raw run is saved to ``--out`` (``<suite>-seed<N>-run.json``) for
``--replay``, which also refreshes the comparison (``<suite>-seed<N>.json``). A foreign
job running during the trace voids the run (it is retried).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))

from live_cluster import SUITE, ctld, exclusive_cluster, node_weights, restore_weights, sbatch

from slurm_defrag.domain.gres import gpu_indices
from slurm_defrag.domain.units import MILLI
from slurm_defrag.sim.backfill import Plans, first_in_order, plan
from slurm_defrag.sim.cluster_state import BoolArray, ClusterState
from slurm_defrag.sim.defrag import RunningJob
from slurm_defrag.sim.engine import Engine, EngineConfig
from slurm_defrag.sim.model import JobSpec, NodeSpec, Placement
from slurm_defrag.sim.placement.base import PlacementPolicy, PolicyContext
from slurm_defrag.sim.placement.registry import build

GPU_TYPES = ("a100", "a100-80g", "h100")
GPU_COUNTS = (1, 2, 4, 8)
GPU_COUNT_P = (0.45, 0.3, 0.15, 0.1)
ACTIVE = {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING"}
STARTED = {"RUNNING", "COMPLETING", "COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL"}
BF_RESOLUTION = 60.0
"""slurmctld's default ``bf_resolution`` (seconds)."""
TOPOLOGY_CONF = Path(__file__).resolve().parents[1] / "docker" / "slurm" / "topology.conf"
"""The compose cluster's switches; runs saved before the topology was recorded used it."""
LEVER_BUMP = 1000
"""``packing_weight_bump`` of the lever service."""
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


@dataclass(frozen=True)
class TraceJob:
    gpus: int
    gpu_type: str | None
    cpus: int
    offset_s: float
    run_s: int


@dataclass
class Observed:
    job_id: str
    node: str
    gpus: tuple[int, ...]
    submit: float
    start: float
    end: float | None = None
    scheduler: str = ""
    """Which slurmctld pass started it: ``Main`` or ``Backfill``."""


class ForeignJob(RuntimeError):
    """Another job ran on the cluster during the trace: its placements are not comparable."""


def make_trace(
    n: int, seed: int, run_s: tuple[int, int] = (20, 90), load: float = 1.3, gpus: int = 32
) -> list[TraceJob]:
    """``n`` jobs whose offered GPU load is ``load`` x the cluster's ``gpus`` (queues form)."""
    rng = np.random.default_rng(seed)
    counts = rng.choice(GPU_COUNTS, size=n, p=GPU_COUNT_P)
    runs = rng.integers(run_s[0], run_s[1] + 1, size=n)
    mean_work = float(np.dot(GPU_COUNTS, GPU_COUNT_P)) * float(np.mean(run_s))
    gap = mean_work / (load * gpus)
    t = 0.0
    out: list[TraceJob] = []
    for k in range(n):
        typ = None if rng.random() < 0.5 else str(rng.choice(GPU_TYPES))
        cpus = int(counts[k]) * int(rng.integers(1, 5))
        out.append(TraceJob(int(counts[k]), typ, cpus, round(t, 1), int(runs[k])))
        t += float(rng.exponential(gap))
    return out


# -- real Slurm ---------------------------------------------------------------------------

_FIELD = re.compile(r"(\w+)=(\S*)")


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _jobs_now() -> list[dict[str, str]]:
    """``scontrol show job -d -o`` for every job slurmctld still knows, one dict each."""
    out = ctld("scontrol", "show", "job", "-d", "-o", check=False)
    rows = []
    for line in out.splitlines():
        if line.startswith("JobId="):
            rows.append(dict(_FIELD.findall(line)))
    return rows


def wait_quiet(timeout_s: float = 600) -> None:
    """Wait until no job is pending or running (other people's work ends first)."""
    deadline = time.monotonic() + timeout_s
    while any(r.get("JobState") in ACTIVE for r in _jobs_now()):
        if time.monotonic() > deadline:
            raise ForeignJob("the cluster did not become quiet")
        time.sleep(3)


def _record(rows: list[dict[str, str]], mine: set[str], seen: dict[str, Observed]) -> None:
    """Note where our jobs run and when they end; raise ForeignJob on anyone else's."""
    for row in rows:
        jid, state = row["JobId"], row.get("JobState", "")
        if jid not in mine:
            if state in ACTIVE:
                raise ForeignJob(f"job {jid} ({row.get('JobName')}) of someone else is {state}")
            continue
        if int(row.get("Restarts", "0")):
            raise ForeignJob(f"job {jid} was requeued by someone else")
        if jid not in seen and state in STARTED:
            seen[jid] = Observed(
                jid,
                row["NodeList"],
                tuple(sorted(gpu_indices(row.get("GRES")))),
                _stamp(row["SubmitTime"]),
                _stamp(row["StartTime"]),
                scheduler=row.get("Scheduler", ""),
            )
        if state in ENDED and jid in seen and seen[jid].end is None:
            seen[jid].end = _stamp(row["EndTime"])


def limit_minutes(job: TraceJob) -> int:
    """The job's ``--time`` (Slurm's unit is minutes); backfill plans with it."""
    return math.ceil((job.run_s + 5) / 60)


def _submit(job: TraceJob, name: str) -> str:
    gres = f"gpu:{job.gpu_type}:{job.gpus}" if job.gpu_type else f"gpu:{job.gpus}"
    job_id: str = sbatch(
        "-J",
        name,
        f"--gres={gres}",
        "-c",
        str(job.cpus),
        "-t",
        str(limit_minutes(job)),
        "-o",
        "/dev/null",
        wrap=f"sleep {job.run_s}",
    )
    return job_id


Timeline = list[tuple[float, dict[str, int]]]
"""(Unix time first seen, every node's Weight), one entry per change."""


def run_live(
    trace: list[TraceJob],
    tag: str,
    poll_s: float = 0.5,
    timeout_s: float = 1800,
    weights: Timeline | None = None,
) -> list[Observed]:
    """Submit ``trace`` at its offsets and record where each job ran; raises ForeignJob.
    With ``weights``, each poll also appends the node Weights when they changed (what the
    service's packing lever set), so the model can be given the Weights of each moment."""
    ids: list[str] = []
    seen: dict[str, Observed] = {}
    t0 = time.monotonic()
    try:
        while len(ids) < len(trace) or any(i not in seen or seen[i].end is None for i in ids):
            if time.monotonic() - t0 > timeout_s:
                raise TimeoutError(f"trace {tag} did not finish within {timeout_s:g} s")
            while len(ids) < len(trace) and time.monotonic() - t0 >= trace[len(ids)].offset_s:
                ids.append(_submit(trace[len(ids)], f"xc-{tag}-{len(ids)}"))
            _record(_jobs_now(), set(ids), seen)
            if weights is not None:
                now = time.time()
                current = node_weights()
                if not weights or weights[-1][1] != current:
                    weights.append((now, current))
            time.sleep(poll_s)
    except BaseException:
        if ids:  # leave nothing of ours behind on an aborted attempt
            ctld("scancel", *ids, check=False)
        raise
    return [seen[i] for i in ids]


def cluster_nodes() -> list[NodeSpec]:
    """The cluster's nodes as the simulator sees them, in Slurm's node order (``sinfo``)."""
    nodes: dict[str, NodeSpec] = {}
    for line in ctld("sinfo", "-N", "-h", "-o", "%N %c %m %w %G").splitlines():
        name, cpus, mem, weight, gres = line.split()
        m = re.match(r"gpu:([^:(]+):(\d+)", gres)
        if m is None:
            raise ValueError(f"node {name}: no typed GPU GRES in {gres!r}")
        nodes[name] = NodeSpec(
            name, int(cpus) * MILLI, int(mem), int(m[2]), m[1], weight=int(weight)
        )
    return [nodes[k] for k in sorted(nodes)]


# -- simulator ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Replayed:
    node: str | None
    gpus: tuple[int, ...]


def origin(observed: list[Observed]) -> float:
    """Simulator time 0: the whole minute before the first submit, so that backfill's
    ``bf_resolution`` rounding falls on the same instants as slurmctld's (it rounds Unix
    times)."""
    return math.floor(min(o.submit for o in observed) / 60) * 60


def sim_jobs(trace: list[TraceJob], observed: list[Observed]) -> list[JobSpec]:
    """The trace as simulator jobs, with the submit and run times Slurm recorded."""
    t0 = origin(observed)
    return [
        JobSpec(
            f"xc-{k}",
            cpu_milli=j.cpus * MILLI,
            memory_mib=0,
            num_gpu=j.gpus,
            gpu_milli=MILLI,
            gpu_models=frozenset({j.gpu_type}) if j.gpu_type else None,
            submit=o.submit - t0,
            duration=(o.end or o.start) - o.start,
            time_limit=60.0 * limit_minutes(j),
        )
        for k, (j, o) in enumerate(zip(trace, observed, strict=True))
    ]


def _first_fit(state: ClusterState) -> PlacementPolicy:
    return build("first-fit", PolicyContext(state, (), np.arange(state.size, dtype=np.int64)))


class LeafBestFit:
    """``topology/tree`` node choice for a one-node job (``eval_nodes_tree.c``): only the
    feasible nodes of the lowest ``Weight`` count; among the leaf switches with such a
    node, the one with the fewest (ties: the first leaf), then the first such node on it;
    GPUs as ``first-fit``."""

    name = "leaf-best-fit"

    def __init__(self, state: ClusterState, leaves: list[list[int]]) -> None:
        self.state = state
        self.leaves = leaves
        self.on_leaf = np.zeros(state.size, dtype=bool)
        for leaf in leaves:
            self.on_leaf[leaf] = True
        self.inner = _first_fit(state)

    def node(self, feasible: BoolArray) -> int:
        """The chosen node; ``feasible`` must have one (nodes on no leaf are not used)."""
        feasible = feasible & self.on_leaf
        if feasible.any():
            weight = self.state.weight
            feasible = feasible & (weight == weight[feasible].min())
        counts = [int(feasible[leaf].sum()) for leaf in self.leaves]
        best = min((k for k, c in enumerate(counts) if c), key=lambda k: counts[k])
        return next(n for n in self.leaves[best] if feasible[n])

    def choose(
        self, state: ClusterState, job: JobSpec, feasible: BoolArray, rng: np.random.Generator
    ) -> Placement | None:
        if not any(feasible[leaf].any() for leaf in self.leaves):
            return None
        only = np.zeros_like(feasible)
        only[self.node(feasible)] = True
        return self.inner.choose(state, job, only, rng)


def _placement(
    state: ClusterState, nodes: list[NodeSpec], leaves: list[list[str]]
) -> PlacementPolicy:
    """Slurm's node choice: first fit, within the best-fitting leaf switch if any."""
    if not leaves:
        return _first_fit(state)
    index = {n.name: i for i, n in enumerate(nodes)}
    return LeafBestFit(state, [[index[x] for x in leaf if x in index] for leaf in leaves])


def _named(nodes: list[NodeSpec], where: Placement | None) -> Replayed:
    return Replayed(nodes[where.node].name, where.gpus) if where else Replayed(None, ())


def weights_at(timeline: Timeline | None, unix_s: float) -> dict[str, int] | None:
    """The Weights last seen at or before ``unix_s`` (None: before the first record)."""
    seen = None
    for t, weights in timeline or ():
        if t > unix_s:
            break
        seen = weights
    return seen


def _set_weights(state: ClusterState, weights: dict[str, int] | None) -> None:
    for n, spec in enumerate(state.nodes):
        if weights is not None and spec.name in weights:
            state.set_weight(n, weights[spec.name])


def replay(
    jobs: list[JobSpec],
    nodes: list[NodeSpec],
    run: dict[str, Any],
    leaves: list[list[str]],
    timeline: Timeline | None = None,
    t0: float = 0.0,
) -> list[Replayed]:
    """End to end: the simulator schedules the trace itself (queue, backfill, placement),
    backfill planning every job it tests like slurmctld (``bf_reserve="all"``). With a
    Weight ``timeline`` (simulator time 0 = Unix ``t0``), the Weights Slurm had are set
    every half second: the levers as they were, not as the simulator would have made them."""
    state = ClusterState(nodes)
    cfg = EngineConfig(
        bf_interval=run["bf_interval"],
        bf_max_job_test=500,
        bf_reserve="all",
        bf_resolution=run.get("bf_resolution", BF_RESOLUTION),
        lever_interval=0.5,
    )
    policy = _placement(state, nodes, leaves)
    picker = policy.node if isinstance(policy, LeafBestFit) else None

    def levers(now: float) -> None:
        _set_weights(state, weights_at(timeline, t0 + now))

    stats = Engine(
        state,
        jobs,
        policy,
        np.random.default_rng(0),
        config=cfg,
        plan_node=picker,
        levers=levers if timeline else None,
    ).run()
    return [_named(nodes, r.placement) for r in stats.records]


def same_state(
    jobs: list[JobSpec],
    observed: list[Observed],
    nodes: list[NodeSpec],
    leaves: list[list[str]],
    bf_resolution: float = BF_RESOLUTION,
    timeline: Timeline | None = None,
) -> list[Replayed]:
    """Decision by decision: where Slurm's rules put each job at the moment Slurm started
    it, on the cluster as Slurm had allocated it then (jobs started earlier, or in the same
    second with a lower id, and not yet ended), avoiding the nodes backfill would have
    planned for the jobs still waiting ahead of it (submitted earlier, started later).
    This isolates the placement and planning rules from scheduling timing. With a Weight
    ``timeline``, the node Weights are those last seen by the start's second."""
    index = {n.name: i for i, n in enumerate(nodes)}
    t0 = origin(observed)
    out = []
    for k, (job, o) in enumerate(zip(jobs, observed, strict=True)):
        state = ClusterState(nodes)
        _set_weights(state, weights_at(timeline, o.start))
        running = {}
        for i, (other, p) in enumerate(zip(jobs, observed, strict=True)):
            before = p.start < o.start or (p.start == o.start and i < k)
            if i != k and before and (p.end or math.inf) > o.start:
                where = Placement(index[p.node], p.gpus)
                state.allocate(other, where)
                running[i] = RunningJob(other, where, p.start - t0)
        policy = _placement(state, nodes, leaves)
        picker = policy.node if isinstance(policy, LeafBestFit) else first_in_order(state)
        now = o.start - t0
        plans = Plans(bf_resolution)
        for i, p in enumerate(observed[:k]):
            if p.submit <= o.start and p.start > o.start:  # still waiting, higher priority
                res = plan(state, jobs[i], running, now, plans, picker)
                if res is not None:
                    plans.add(res.node, res.start, jobs[i].estimate, now)
        feasible = state.feasible(job) & ~plans.blocked(state.size, now, job.estimate)
        out.append(_named(nodes, policy.choose(state, job, feasible, np.random.default_rng(0))))
    return out


# -- comparison ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    suite: str
    slurm_version: str
    jobs: int
    seed: int
    same_node_pct: float
    """End to end (:func:`replay`)."""
    same_gpus_pct: float
    decision_node_pct: float
    """Decision by decision (:func:`same_state`)."""
    decision_gpus_pct: float
    differing: list[dict[str, object]]
    lever_changed: int = 0
    """Decisions (by decision) whose node the recorded Weights changed: where the lever
    steered, by the model's account."""


def _agreement(observed: list[Observed], sim: list[Replayed]) -> tuple[float, float, list[int]]:
    """% same node, % same node and GPU indices, and the jobs that differ."""
    node = [o.node == r.node for o, r in zip(observed, sim, strict=True)]
    gpus = [n and o.gpus == r.gpus for n, o, r in zip(node, observed, sim, strict=True)]
    n = len(observed)
    return 100.0 * sum(node) / n, 100.0 * sum(gpus) / n, [k for k, ok in enumerate(gpus) if not ok]


def compare(trace: list[TraceJob], observed: list[Observed], run: dict[str, Any]) -> Result:
    nodes = run_nodes(run)
    jobs = sim_jobs(trace, observed)
    leaves = run.get("leaves") or leaf_switches_from(TOPOLOGY_CONF.read_text())
    timeline: Timeline = [(t, w) for t, w in run.get("weights", [])]
    e2e = replay(jobs, nodes, run, leaves, timeline, origin(observed))
    bf_res = run.get("bf_resolution", BF_RESOLUTION)
    each = same_state(jobs, observed, nodes, leaves, bf_res, timeline)
    steered = 0
    if timeline:
        plain = same_state(jobs, observed, nodes, leaves, bf_res)
        steered = sum(a.node != b.node for a, b in zip(each, plain, strict=True))
    node_pct, gpus_pct, differ = _agreement(observed, e2e)
    dec_node, dec_gpus, _ = _agreement(observed, each)
    t0 = origin(observed)
    rows: list[dict[str, object]] = [
        {
            "job": k,
            "gpus": trace[k].gpus,
            "type": trace[k].gpu_type,
            "cpus": trace[k].cpus,
            "submit": round(observed[k].submit - t0),
            "start": round(observed[k].start - t0),
            "slurm": f"{observed[k].node}{list(observed[k].gpus)}",
            "sim": f"{e2e[k].node}{list(e2e[k].gpus)}",
            "sim_same_state": f"{each[k].node}{list(each[k].gpus)}",
            "started_by": observed[k].scheduler,
        }
        for k in differ
    ]
    return Result(
        run["suite"],
        run["slurm_version"],
        len(trace),
        run["seed"],
        node_pct,
        gpus_pct,
        dec_node,
        dec_gpus,
        rows,
        steered,
    )


def run_nodes(run: dict[str, Any]) -> list[NodeSpec]:
    fields = set(NodeSpec.__match_args__)
    return [
        NodeSpec(**{k: frozenset(v) if k == "features" else v for k, v in x.items() if k in fields})
        for x in run["nodes"]
    ]


def run_trace(
    trace: list[TraceJob], seed: int, retries: int = 3, weights: Timeline | None = None
) -> list[Observed]:
    """Run ``trace`` on the cluster alone, retrying when someone else's job shows up."""
    for attempt in range(retries):
        wait_quiet()
        try:
            with exclusive_cluster():
                wait_quiet()
                if weights is not None:
                    weights.clear()  # an aborted attempt's record is not this run's
                return run_live(trace, f"{seed}-{int(time.time())}", weights=weights)
        except ForeignJob as exc:
            print(f"attempt {attempt + 1}: {exc}; retrying", file=sys.stderr)
    raise ForeignJob(f"foreign jobs spoiled all {retries} attempts")


def scheduler_parameter(name: str, default: float) -> float:
    """One numeric ``SchedulerParameters`` entry of the running slurmctld."""
    match = re.search(rf"{name}=(\d+)", ctld("scontrol", "show", "config"))
    return float(match[1]) if match else default


def _expand(hostlist: str) -> list[str]:
    """``node[01-02],node04`` -> names (the forms the compose cluster's config uses)."""
    out: list[str] = []
    for prefix, body, single in re.findall(r"([^,\[]+)\[([^\]]+)\]|([^,\[\]]+)", hostlist):
        if single:
            out.append(single)
            continue
        for part in body.split(","):
            lo, _, hi = part.partition("-")
            out += [f"{prefix}{k:0{len(lo)}d}" for k in range(int(lo), int(hi or lo) + 1)]
    return out


def leaf_switches_from(text: str) -> list[list[str]]:
    """The node names under each leaf switch of a topology.conf or ``scontrol show
    topology`` text (a switch listing ``Nodes=`` but no ``Switches=``)."""
    leaves = []
    for line in text.splitlines():
        fields = dict(_FIELD.findall(line.split("#")[0]))
        if "SwitchName" in fields and "Nodes" in fields and "Switches" not in fields:
            leaves.append(_expand(fields["Nodes"]))
    return leaves


@contextmanager
def weight_lever() -> Iterator[None]:
    """The service's packing lever active: a service container in enforce mode with
    packing on and no strategy (so it plans nothing: no reservation, no requeue), a cycle
    every 4 s. The Weights are put back afterwards, whatever happened."""
    with tempfile.TemporaryDirectory(prefix="xc-levers-") as tmp:
        workdir = Path(tmp)
        workdir.chmod(0o755)  # readable by the service user inside the container
        (workdir / "policy.toml").write_text("version = 1\nstrategies = []\n")
        with _lever_service(workdir):
            yield


@contextmanager
def _lever_service(workdir: Path) -> Iterator[None]:
    # Imported here: the offline replay (tests/sim) needs no database driver or Docker.
    from service_container import ServiceContainer, scratch_database

    before = node_weights()
    db = scratch_database()
    svc = None
    try:
        svc = ServiceContainer.start(
            "xc-levers",
            db,
            user="root",  # node weights need Slurm Admin rights
            mode="enforce",
            interval_s=4,
            lease_ttl_s=8,
            packing=True,
            packing_weight_bump=LEVER_BUMP,
            policy="/etc/slurm-defrag/xc/policy.toml",
            files={"/etc/slurm-defrag/xc": workdir},
        )
        deadline = time.monotonic() + 90
        while not any(w >= before[n] + LEVER_BUMP for n, w in node_weights().items()):
            if time.monotonic() > deadline or not svc.running():
                raise RuntimeError(f"the packing lever never raised a Weight: {svc.logs()}")
            time.sleep(1)
        yield
    finally:
        if svc is not None:
            svc.stop()
            svc.remove()
        db.drop()
        restore_weights(before)


def crosscheck(
    n: int,
    seed: int,
    run_s: tuple[int, int],
    load: float,
    save: Path,
    levers: bool = False,
) -> Result:
    """Run the trace on the cluster and in the simulator; the raw run is saved to ``save``.
    ``levers``: with the service's Weight lever active (:func:`weight_lever`), its Weights
    recorded while the trace runs and given to the model."""
    trace = make_trace(n, seed, run_s, load)
    timeline: Timeline | None = [] if levers else None
    with weight_lever() if levers else nullcontext():
        observed = run_trace(trace, seed, weights=timeline)
    run = {
        "suite": SUITE,
        "slurm_version": ctld("scontrol", "--version").strip(),
        "seed": seed,
        "bf_interval": scheduler_parameter("bf_interval", 30.0),
        "bf_resolution": scheduler_parameter("bf_resolution", BF_RESOLUTION),
        "leaves": leaf_switches_from(ctld("scontrol", "show", "topology", check=False)),
        # features are a set: stored sorted, read back as a frozenset (run_nodes)
        "nodes": [{**asdict(x), "features": sorted(x.features)} for x in cluster_nodes()],
        "trace": [asdict(j) for j in trace],
        "observed": [asdict(o) for o in observed],
        "levers": "weight" if levers else "none",
        "weights": timeline or [],
    }
    save.write_text(json.dumps(run, indent=1))
    return compare(trace, observed, run)


def recheck(saved: Path) -> Result:
    """Compare a saved live run with the simulator again (no cluster needed)."""
    run = json.loads(saved.read_text())
    trace = [TraceJob(**j) for j in run["trace"]]
    observed = [Observed(**{**o, "gpus": tuple(o["gpus"])}) for o in run["observed"]]
    return compare(trace, observed, run)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=60)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--run-min", type=int, default=20)
    ap.add_argument("--run-max", type=int, default=90)
    ap.add_argument("--load", type=float, default=1.3)
    ap.add_argument("--out", type=Path, default=Path("docs/img/sim/crosscheck"))
    ap.add_argument("--replay", type=Path, help="re-simulate a saved run (*-run.json)")
    ap.add_argument(
        "--levers", action="store_true", help="with the service's packing (Weight) lever active"
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.replay:
        res = recheck(args.replay)
        result: Path | None = None
        if args.replay.name.endswith("-run.json"):  # refresh the comparison next to the run
            result = args.replay.with_name(args.replay.name.removesuffix("-run.json") + ".json")
    else:
        stem = f"{SUITE}-seed{args.seed}" + ("-levers" if args.levers else "")
        save = args.out / f"{stem}-run.json"
        run_s = (args.run_min, args.run_max)
        res = crosscheck(args.jobs, args.seed, run_s, args.load, save, args.levers)
        result = args.out / f"{stem}.json"
    if result is not None:
        result.write_text(json.dumps(asdict(res), indent=1))
    for row in res.differing:
        print(row)
    print(
        f"{res.suite} ({res.slurm_version}), {res.jobs} jobs, seed {res.seed}. "
        f"End to end: same node {res.same_node_pct:.1f} %, same node and GPU indices "
        f"{res.same_gpus_pct:.1f} %. Decision by decision: same node "
        f"{res.decision_node_pct:.1f} %, same GPU indices {res.decision_gpus_pct:.1f} %"
        + (f"; the recorded Weights changed {res.lever_changed} decisions" if args.levers else "")
    )


if __name__ == "__main__":
    main()
