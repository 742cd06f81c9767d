"""Floors under the large jobs' mean wait in Protocol B: what the scarce node shapes allow.

    .venv/bin/python bench/sim_wait_bound.py [--workload multigpu50] [--load 0.9]
        [--seeds 6] [--first-seed 42] [--slot 60] [--results RUN.json ...]

Protocol B's goals ask for a large-job mean wait below a fraction of first fit's. Some
large jobs fit only a few nodes (multigpu50's "8 big": the five 128-CPU nodes); they
queue for those nodes whatever else happens. For them (the large jobs at most
``SCARCE_SHARE`` of the GPU nodes can hold) the script prints two floors, as a mean over
all measured large jobs (the others count as waiting 0):

* **in submit order**: each scarce job that takes a whole node of the one node shape that
  holds it, started in submit order on those nodes and on nothing else: list scheduling
  with every other job kept away. No Weight, feature, reservation or requeue beats it
  while those jobs start in Slurm's own order (equal priority: oldest first; backfill
  cannot pass the head of a queue of identical whole-node requests). Only a priority
  change can: job_submit.lua's ``short_first``.
* **any order** (a true lower bound for any scheduler at all): the relaxation below.

The second drops every constraint the levers work within. It keeps only:

* each large job (>= ``LARGE_GPUS`` whole GPUs) runs on nodes that can hold it (GPU
  count and model, CPUs, memory), as in the simulator;
* a node group offers its GPUs, nothing more, at every instant;
* a job runs on at most its own GPU count at a time, so it cannot finish faster than
  its run time.

Everything else is relaxed, which only lowers the bound: jobs may be preempted at no
cost, split over nodes of a group, and resumed; every job but the scarce ones measured is
left out (the others only take capacity away).

Method. For the jobs measured (submitted in [warmup, horizon)), wait = end - submit -
run time. If a job with run time p runs at rate at most 1 and its mean busy time is M,
then its end is at least M + p/2. The least possible sum of mean busy times is a
transportation problem (GPU-seconds of each job into time slots of each node group,
capacity-limited), solved exactly as a min-cost flow (OR-Tools) on slots of
``--slot`` seconds, each slot priced at its start time and open to a job from the slot
its submit time falls in, both of which only lower the bound further. So

    sum of waits >= min sum(M) + sum(p / 2) - sum(submit + p)

and the bound on the mean divides by every measured large job (the others wait >= 0).
"""

from __future__ import annotations

import heapq
import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from ortools.graph.python import min_cost_flow

from diagnosis_world import diagnosis_world, world_parser
from slurm_defrag.sim import protocol_b as pb
from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.model import JobSpec, NodeSpec
from slurm_defrag.sim.protocol_b import LARGE_GPUS

WHOLE = 1000
SCARCE_SHARE = 0.1
"""As job_submit.lua's short_first in the simulator: at most 10 % of the GPU nodes."""
COST_SCALE = 10**6
"""Costs are integers: seconds x COST_SCALE, rounded down (which keeps a lower bound)."""


@dataclass(frozen=True)
class Group:
    """Nodes of one shape: a large job fits all of them or none."""

    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str
    count: int

    def holds(self, job: JobSpec) -> bool:
        return (
            self.gpus >= job.num_gpu
            and self.cpu_milli >= job.cpu_milli
            and self.memory_mib >= job.memory_mib
            and (job.gpu_models is None or self.model in job.gpu_models)
        )


def node_groups(nodes: Sequence[NodeSpec]) -> list[Group]:
    counts: dict[tuple[int, int, int, str], int] = defaultdict(int)
    for n in nodes:
        if n.gpus >= LARGE_GPUS:
            counts[(n.cpu_milli, n.memory_mib, n.gpus, n.model)] += 1
    return [Group(*shape, count=c) for shape, c in sorted(counts.items())]


def measured_large(jobs: Sequence[JobSpec], settings: pb.SettingsB) -> list[JobSpec]:
    return [
        j
        for j in jobs
        if settings.warmup <= j.submit < settings.horizon
        and j.num_gpu >= LARGE_GPUS
        and j.gpu_milli == WHOLE
    ]


def min_busy_sum(jobs: Sequence[JobSpec], groups: Sequence[Group], slot: float) -> float:
    """Least sum over ``jobs`` of their mean busy time (seconds), the relaxation above."""
    work = [j.num_gpu * math.floor(j.duration) for j in jobs]  # GPU-seconds, rounded down
    first = [int(j.submit // slot) for j in jobs]
    fits = [[g for g, grp in enumerate(groups) if grp.holds(j)] for j in jobs]
    if any(not f for f in fits):
        raise SystemExit("a large job fits no node: the trace and cluster do not match")
    # enough slots for everything to run even if only the smallest eligible group serves
    smallest = min(grp.gpus * grp.count for grp in groups)
    span = max(first) + 2 + math.ceil(sum(work) / (smallest * slot))
    n_jobs, n_groups = len(jobs), len(groups)
    # flow nodes: source 0, jobs, (group, slot), per-(job, slot) splitters, sink
    gs_base = 1 + n_jobs
    sink = gs_base + n_groups * span
    next_node = sink + 1
    tails: list[int] = []
    heads: list[int] = []
    caps: list[int] = []
    costs: list[int] = []

    def arc(t: int, h: int, cap: int, cost: int) -> None:
        tails.append(t)
        heads.append(h)
        caps.append(cap)
        costs.append(cost)

    for i, job in enumerate(jobs):
        arc(0, 1 + i, work[i], 0)
        rate = int(job.num_gpu * slot)  # at most its own GPUs at a time
        unit = COST_SCALE / work[i]  # M = sum(t x) / work
        for s in range(first[i], span):
            cost = int(s * slot * unit)
            if len(fits[i]) == 1:
                arc(1 + i, gs_base + fits[i][0] * span + s, rate, cost)
                continue
            arc(1 + i, next_node, rate, cost)
            for g in fits[i]:
                arc(next_node, gs_base + g * span + s, rate, 0)
            next_node += 1
    for g, grp in enumerate(groups):
        for s in range(span):
            arc(gs_base + g * span + s, sink, int(grp.gpus * grp.count * slot), 0)
    flow = min_cost_flow.SimpleMinCostFlow()
    flow.add_arcs_with_capacity_and_unit_cost(
        np.array(tails), np.array(heads), np.array(caps), np.array(costs)
    )
    supplies = np.zeros(next_node, dtype=np.int64)
    supplies[0], supplies[sink] = sum(work), -sum(work)
    flow.set_nodes_supplies(np.arange(next_node), supplies)
    status = flow.solve()
    if status != flow.OPTIMAL:
        raise SystemExit(f"min-cost flow did not solve: status {status}")
    return flow.optimal_cost() / COST_SCALE


def wait_bound(jobs: Sequence[JobSpec], groups: Sequence[Group], slot: float) -> float:
    """Lower bound on the sum of the jobs' waits (seconds)."""
    busy = min_busy_sum(jobs, groups, slot)
    return max(0.0, busy - sum(j.submit + j.duration / 2 for j in jobs))


def seed_jobs(
    nodes: Sequence[NodeSpec], trace: Sequence[JobSpec], settings: pb.SettingsB, seed: int
) -> list[JobSpec]:
    """The arrivals run_b draws for this seed (run times are not touched by user limits)."""
    pool = pb.job_pool(trace, settings.max_runtime)
    rate = pb.arrival_rate(pool, ClusterState(nodes).total_gpu_milli, settings.load)
    return pb.arrivals(pool, rate, settings.horizon, np.random.default_rng(seed))


def scarce(jobs: Sequence[JobSpec], groups: Sequence[Group], gpu_nodes: int) -> list[JobSpec]:
    """The jobs at most SCARCE_SHARE of the GPU nodes can hold."""
    return [
        j for j in jobs if sum(g.count for g in groups if g.holds(j)) <= SCARCE_SHARE * gpu_nodes
    ]


def submit_order_floor(
    arrived: Sequence[JobSpec], groups: Sequence[Group], gpu_nodes: int, settings: pb.SettingsB
) -> float:
    """Sum of the measured waits (s) of the scarce whole-node jobs of one node shape, each
    shape's jobs started in submit order on its nodes alone (earlier arrivals included:
    they are ahead in the queue)."""
    total = 0.0
    for g in groups:
        own = [
            j
            for j in arrived
            if j.num_gpu == g.gpus
            and [h for h in groups if h.holds(j)] == [g]
            and g.count <= SCARCE_SHARE * gpu_nodes
        ]
        free = [0.0] * g.count
        for job in sorted(own, key=lambda j: j.submit):
            start = max(heapq.heappop(free), job.submit)
            heapq.heappush(free, start + job.duration)
            if settings.warmup <= job.submit < settings.horizon:
                total += start - job.submit
    return total


def recorded(paths: Sequence[str], load: float) -> dict[tuple[str, int], float]:
    """Large-job mean waits (s) by (configuration, seed) from sim_protocol_b.py results."""
    out: dict[tuple[str, int], float] = {}
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            for run in json.load(fh)["runs"]:
                if run["load"] == load:
                    extra = "" if run["defrag"] == "none" else f" + {run['defrag']}"
                    name = run["policy"] + extra
                    out[(name, run["seed"])] = run["large_wait_mean_s"]
    return out


def main() -> None:
    ap = world_parser(__doc__, "multigpu50", 0.9, 6)
    ap.add_argument("--slot", type=float, default=60.0, help="time slot, seconds")
    ap.add_argument(
        "--goal",
        type=float,
        default=None,
        help="the goal as a fraction of first fit (default: 0.4 at 0.9x, 0.5 above)",
    )
    ap.add_argument(
        "--results",
        nargs="*",
        default=[],
        help="sim_protocol_b.py JSON files holding first-fit (and other) runs",
    )
    args = ap.parse_args()
    goal = args.goal if args.goal is not None else (0.4 if args.load < 1.0 else 0.5)
    nodes, trace, settings = diagnosis_world(args.workload, args.load)
    groups = node_groups(nodes)
    runs = recorded(args.results, args.load)
    print(
        f"{args.workload} {args.load}x, slots of {args.slot:.0f} s; node groups: "
        + ", ".join(
            f"{g.count} x {g.gpus} {g.model} {g.cpu_milli // 1000} CPU {g.memory_mib // 1024} GiB"
            for g in groups
        )
    )
    gpu_nodes = sum(n.gpus > 0 for n in nodes)
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        arrived = seed_jobs(nodes, trace, settings, seed)
        large = measured_large(arrived, settings)
        few = scarce(large, groups, gpu_nodes)
        n = len(large) * 3600
        any_order = wait_bound(few, groups, args.slot) / n if few else 0.0
        in_order = submit_order_floor(arrived, groups, gpu_nodes, settings) / n
        line = (
            f"seed {seed}: {len(large)} large jobs, {len(few)} scarce; mean large wait "
            f">= {in_order:.3f} h in submit order, >= {any_order:.3f} h in any order"
        )
        ff = runs.get(("first-fit", seed))
        if ff:
            ff_h, cap = ff / 3600, goal * ff / 3600
            line += (
                f" | first fit {ff_h:.3f} h, goal <= {cap:.3f} h: floors "
                f"{in_order / ff_h:.2f}x / {any_order / ff_h:.2f}x; "
                f"{'out of reach in submit order' if in_order > cap else 'reachable'}"
            )
            best = [
                (w / 3600, name)
                for (name, s), w in runs.items()
                if s == seed and name != "first-fit"
            ]
            if best:
                w, name = min(best)
                line += f"; best run {w / ff_h:.2f}x ({name})"
        print(line)


if __name__ == "__main__":
    main()
