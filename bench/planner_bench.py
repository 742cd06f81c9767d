"""Benchmark: plan 50 targets on a generated 1,000- (or 10,000-) node cluster.

    python bench/planner_bench.py --nodes 1000 --targets 50
    python bench/planner_bench.py --nodes 10000 --targets 50
    python bench/planner_bench.py --overeviction 1,8,32,128
    python bench/planner_bench.py --nodes 10000 --targets 500 --repeat 3
    python bench/planner_bench.py --nodes 1000 --targets 50 --set deterministic=false

The cluster: 8-GPU nodes of mixed topologies (NVSwitch, NVLink pairs, DGX-1 cube mesh,
PCIe), 90% of GPUs busy with mostly 1-GPU jobs placed at random (~6 jobs per node), 10% of
jobs not requeueable, a protected "prod" QOS. Targets: pending 2/4/8-GPU jobs, mostly
NVLink, some on two nodes, some tied to a GPU model. Times are wall clock of
``make_plan`` (candidates, CP-SAT with 2 workers, assembly), measured in this process.
"""

from __future__ import annotations

import argparse
import random
import time
from datetime import timedelta

from slurm_defrag.domain.cluster import ClusterSnapshot, GpuRequest, Job, JobState, Node
from slurm_defrag.domain.topology import BUILTIN_TOPOLOGIES
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.policy.file import parse_policy
from slurm_defrag.synth import EPOCH, MIXED_KINDS

SIZES = ((1, 0.82), (2, 0.12), (4, 0.06))


def busy_cluster(
    n_nodes: int, n_targets: int, seed: int = 1, fill: float = 0.9, target_prefix: str = "p"
) -> tuple[ClusterSnapshot, list[str]]:
    """``target_prefix``: pending job ids are prefix + number ("9" gives Slurm-valid ids,
    which the executor insists on; "p", the default, keeps the published figures)."""
    rng = random.Random(seed)
    t = EPOCH
    nodes, free = [], {}
    width = len(str(n_nodes))
    for i in range(n_nodes):
        kind = rng.choices(MIXED_KINDS, [k.share for k in MIXED_KINDS])[0]
        topo = BUILTIN_TOPOLOGIES[kind.topology]
        name = f"gpu{i:0{width}d}"
        nodes.append(
            Node(
                name=name,
                partitions=("batch",),
                state=frozenset({"MIXED"}),
                gpu_model=kind.gpu_model,
                gpu_count=topo.gpu_count,
                topology=topo.name,
            )
        )
        free[name] = list(range(topo.gpu_count))
    jobs: list[Job] = []
    names = list(free)
    sizes, weights = zip(*SIZES, strict=True)
    target_used = int(fill * 8 * n_nodes)
    used = 0
    while used < target_used:
        k = rng.choices(sizes, weights)[0]
        node = rng.choice(names)
        if len(free[node]) < k:
            continue
        gpus = rng.sample(free[node], k)
        for g in gpus:
            free[node].remove(g)
        used += k
        hours = rng.uniform(0.2, 30)
        jobs.append(
            Job(
                id=str(len(jobs) + 1000),
                user=f"u{rng.randrange(60)}",
                partition="batch",
                qos="prod" if rng.random() < 0.05 else "normal",
                priority=rng.randrange(10000),
                state=JobState.RUNNING,
                start_time=t - timedelta(hours=hours),
                time_limit_s=int((hours + rng.uniform(0.3, 24)) * 3600),
                requeue=rng.random() > 0.1,
                gpus={node: frozenset(gpus)},
            )
        )
    models = sorted({k.gpu_model for k in MIXED_KINDS})
    targets = []
    for i in range(n_targets):
        k = rng.choice((2, 4, 4, 8))
        n = 2 if rng.random() < 0.1 else 1
        jid = f"{target_prefix}{i:05d}" if target_prefix.isdigit() else f"{target_prefix}{i}"
        jobs.append(
            Job(
                id=jid,
                user=f"u{rng.randrange(60)}",
                partition="batch",
                priority=rng.randrange(10000),
                state=JobState.PENDING,
                reason="Resources",
                submit_time=t - timedelta(minutes=rng.uniform(1, 600)),
                request=GpuRequest(
                    nodes=n,
                    gpus_per_node=k,
                    gpu_model=rng.choice([None, None, *models]),
                    nvlink=rng.random() < 0.85,
                ),
            )
        )
        targets.append(jid)
    snap = ClusterSnapshot(
        cluster=f"busy-{n_nodes}",
        taken_at=t,
        source="simulator",
        nodes=tuple(nodes),
        jobs=tuple(jobs),
    )
    return snap, targets


POLICY = {
    "version": 1,
    "protections": {"qos": ["prod"]},
    # The solver's scale, not the limits': none binds (the per-user ones of issue #40 too,
    # which would cut the 500 targets' plans to a few users' budgets).
    "limits": {
        "max_victims_per_plan": None,
        "max_preemptions_per_user_per_day": None,
        "max_gpu_hours_lost_per_user_per_day": None,
        "max_requeues_for_user_per_day": None,
        "max_gpu_hours_lost_for_user_per_day": None,
    },
    "solver": {"num_workers": 2, "max_time_in_seconds": 60},
}


def run_scale(
    n_nodes: int,
    n_targets: int,
    seed: int,
    limits: dict[str, object],
    solver: dict[str, object],
    repeat: int = 1,
    stages: bool = False,
) -> None:
    import hashlib
    import resource

    spent = time_stages() if stages else None

    t0 = time.perf_counter()
    snap, targets = busy_cluster(n_nodes, n_targets, seed)
    gen = time.perf_counter() - t0
    running = sum(1 for _ in snap.running_gpu_jobs())
    print(
        f"snapshot: {len(snap.nodes)} nodes, {sum(n.gpu_count for n in snap.nodes)} GPUs, "
        f"{running} running jobs, {len(targets)} targets (generated in {gen:.1f} s)"
    )
    policy = parse_policy(
        {
            **POLICY,
            "limits": {**POLICY["limits"], **limits},  # type: ignore[dict-item]
            "solver": {**POLICY["solver"], **solver},  # type: ignore[dict-item]
        }
    )
    digests = []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        plan = make_plan(snap, policy, targets)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        s = plan.solver
        digests.append(hashlib.sha256(plan.model_dump_json().encode()).hexdigest()[:12])
        ub, cost, lb = s.served_upper_bound, s.cost_gpu_hours, s.cost_lower_bound_gpu_hours
        served = f"served {s.served}/{len(targets)} (bound {ub}" + (
            f", {s.served / ub:.1%})" if ub else ")"
        )
        costs = f"cost {cost} GPU-h (bound {lb}" + (
            f", +{s.cost_gap:.2%})" if s.cost_gap is not None else ")"
        )
        print(
            f"plan: {wall:.2f} s wall, {cpu:.2f} s CPU (all threads); {served}, "
            f"{len(plan.victims)} victims, {costs}; solver {s.status}, "
            f"optimality {s.optimality}, work {s.work}, deterministic {s.deterministic}; "
            f"{s.options} options (unpruned {s.full_options}), {s.components} parts; "
            f"plan {plan.plan_id} json sha256 {digests[-1]}"
        )
    if spent is not None:
        print(
            "stages (CPU/wall s, all runs): "
            + ", ".join(f"{k} {c:.1f}/{w:.1f}" for k, (c, w) in spent.items())
        )
        if s.cut_short:
            print(f"cut short: {', '.join(s.cut_short)}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {rss:.0f} MB; {len(set(digests))} distinct plan JSON in {repeat} run(s)")


def time_stages() -> dict[str, list[float]]:
    """Wrap the planner's stages with timers: name -> [CPU s, wall s] (all calls added)."""
    import functools

    from slurm_defrag.planner import candidates, facade
    from slurm_defrag.solver import model

    spent: dict[str, list[float]] = {}

    def wrap(owner: object, attr: str, name: str) -> None:
        inner = getattr(owner, attr)

        @functools.wraps(inner)
        def timed(*args: object, **kwargs: object) -> object:
            c0, w0 = time.process_time(), time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                acc = spent.setdefault(name, [0.0, 0.0])
                acc[0] += time.process_time() - c0
                acc[1] += time.perf_counter() - w0

        setattr(owner, attr, timed)

    wrap(candidates.CandidateBuilder, "eligibility", "eligibility")
    wrap(candidates.CandidateBuilder, "_prune", "pruning (in candidates)")
    wrap(candidates.CandidateBuilder, "build", "candidates")
    wrap(facade, "to_problem", "problem data")
    wrap(model.PlannerModel, "__init__", "model")
    wrap(model.PlannerModel, "solve", "greedy + CP-SAT")
    wrap(facade, "assemble", "explanations and assembly")
    return spent


def run_overeviction(sizes: list[int]) -> None:
    from slurm_defrag.baselines.free_node import free_node
    from slurm_defrag.baselines.slurm_greedy import slurm_preempt

    policy = parse_policy(POLICY)
    print(
        "| nodes | target | planner | Slurm tier/overlap | Slurm tier/removed | "
        "Slurm youngest/removed (removed in search) | free-node |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n in sizes:
        for k in (8, 4):
            snap = _packed(n, k)
            t0 = time.perf_counter()
            plan = make_plan(snap, policy, ["target"])
            dt = time.perf_counter() - t0
            a = slurm_preempt(snap, policy, "target", "tier", "overlap")
            b = slurm_preempt(snap, policy, "target", "tier", "removed")
            c = slurm_preempt(snap, policy, "target", "youngest", "removed")
            d = free_node(snap, policy, "target")
            print(
                f"| {n} | 1x{k} NVLink | {len(plan.victims)} ({dt:.2f} s) | "
                f"{len(a.victims)} | {len(b.victims)} | {len(c.victims)} "
                f"({c.removed_in_search}) | {len(d.victims)} |"
            )


def _packed(n_nodes: int, k: int) -> ClusterSnapshot:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "planner"))
    from test_planner_overeviction import packed  # the test's own scenario

    return packed(n_nodes, k)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--targets", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--max-victims", type=int, default=None, help="limits.max_victims_per_plan (default: none)"
    )
    ap.add_argument(
        "--overeviction",
        type=str,
        default=None,
        help="comma list of node counts: run the over-eviction table instead",
    )
    ap.add_argument("--repeat", type=int, default=1, help="plan this many times (same input)")
    ap.add_argument(
        "--stages", action="store_true", help="print the time of each planner stage too"
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a [solver] setting, e.g. --set deterministic=false (repeatable)",
    )
    args = ap.parse_args()
    if args.overeviction:
        run_overeviction([int(x) for x in args.overeviction.split(",")])
        return
    limits = {} if args.max_victims is None else {"max_victims_per_plan": args.max_victims}
    solver: dict[str, object] = {}
    for kv in args.set:
        key, _, raw = kv.partition("=")
        solver[key] = {"true": True, "false": False}.get(raw.lower(), raw)
    run_scale(args.nodes, args.targets, args.seed, limits, solver, args.repeat, args.stages)


if __name__ == "__main__":
    main()
