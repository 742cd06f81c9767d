"""Tiny random planning instances: up to 6 nodes x 8 GPUs, mixed topologies, multi-node
jobs, protections, limits, drains, NVLink domains. Seeded, so every failure replays."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta

from slurm_defrag.domain.cluster import (
    ClusterSnapshot,
    GpuRequest,
    Job,
    JobState,
    Node,
    NvlinkDomain,
)
from slurm_defrag.domain.topology import BUILTIN_TOPOLOGIES
from slurm_defrag.policy.file import Policy, parse_policy
from slurm_defrag.policy.limits import InMemoryPreemptionHistory
from slurm_defrag.synth import EPOCH

TOPOS = (
    "nvswitch-8",
    "nvlink-pairs-8",
    "dgx1-hybrid-cube-mesh",
    "pcie-2x4",
    "nvswitch-4",
    "nvlink-pairs-4",
)
MAX_REQUEUEABLE = 9


@dataclass
class Instance:
    snapshot: ClusterSnapshot
    policy: Policy
    targets: list[str]
    history: InMemoryPreemptionHistory


def random_instance(seed: int, prune: str = "never") -> Instance:
    rng = random.Random(seed)
    t = EPOCH
    n_nodes = rng.randint(2, 6)
    nodes = []
    free: dict[str, list[int]] = {}
    with_domains = rng.random() < 0.25
    for i in range(n_nodes):
        topo = BUILTIN_TOPOLOGIES[rng.choice(TOPOS)]
        state = "MIXED"
        roll = rng.random()
        if roll < 0.07:
            state = "MIXED+DRAIN"
        name = f"n{i}"
        nodes.append(
            Node(
                name=name,
                partitions=("batch",),
                state=frozenset(state.split("+")),
                gpu_model=rng.choice(("a100", "h100")),
                gpu_count=topo.gpu_count,
                topology=topo.name,
                reservation="maint" if rng.random() < 0.05 else None,
                nvlink_domain=(f"rack{i % 2}" if with_domains else None),
            )
        )
        free[name] = list(range(topo.gpu_count))
    jobs: list[Job] = []
    jid = 100
    users = ("ann", "bob", "cid", "dee")
    fill = rng.uniform(0.5, 1.0)
    total = sum(len(v) for v in free.values())
    used = 0
    attempts = 0
    while used < fill * total and attempts < 60:
        attempts += 1
        multi = rng.random() < 0.12 and n_nodes > 1
        k = rng.choice((1, 1, 2, 2, 4))
        where = rng.sample(list(free), 2) if multi else [rng.choice(list(free))]
        k = min(k, 2) if multi else k
        if any(len(free[w]) < k for w in where):
            continue
        gpus = {}
        for w in where:
            pick = rng.sample(free[w], k)
            for g in pick:
                free[w].remove(g)
            gpus[w] = frozenset(pick)
        used += k * len(where)
        hours = rng.uniform(0.05, 8)
        comment = rng.choice(
            [
                "",
                "",
                "",
                "defrag:protect",
                f"defrag:ckpt={(t - timedelta(hours=hours / 3)).isoformat()}",
            ]
        )
        jobs.append(
            Job(
                id=str(jid),
                name=rng.choice(("train", "eval", "jupyter-1")),
                user=rng.choice(users),
                account="acct",
                partition="batch",
                qos=rng.choice(("normal", "normal", "prod", "low")),
                priority=rng.randrange(1000),
                state=JobState.RUNNING,
                start_time=t - timedelta(hours=hours),
                time_limit_s=int((hours + rng.choice((0.3, 1.0, 2.5, 10.0))) * 3600),
                requeue=rng.random() > 0.1,
                gpus=gpus,
                # the opt-out is honoured from the AdminComment, where job_submit.lua puts it
                comment="" if comment == "defrag:protect" else comment,
                admin_comment=comment if comment == "defrag:protect" else "",
            )
        )
        jid += 1
    # an unseen owner now and then (GresUsed busy, no visible job)
    if rng.random() < 0.2:
        node = rng.choice(nodes)
        if free[node.name]:
            g = free[node.name].pop()
            nodes[nodes.index(node)] = node.model_copy(update={"gpus_used": frozenset({g})})
    targets = []
    # The targets' own -x / -w from a stream of their own: the instances stay as they were.
    own = random.Random(seed * 7919 + 1)
    for _ in range(rng.randint(1, 3)):
        k = rng.choice((1, 2, 2, 3, 4, 4, 8))
        n = 2 if rng.random() < 0.2 else 1
        req = GpuRequest(
            nodes=n,
            gpus_per_node=min(k, 4) if n > 1 else k,
            gpu_model=rng.choice((None, None, "a100")),
            nvlink=rng.random() < 0.7,
            whole_node=rng.random() < 0.08,
        )
        jobs.append(
            Job(
                id=str(jid),
                user=rng.choice(users),
                partition="batch",
                priority=rng.randrange(1000),
                state=JobState.PENDING,
                reason="Resources",
                submit_time=t - timedelta(minutes=rng.uniform(1, 300)),
                request=req,
                **_own_limits(own, [x.name for x in nodes], n),
            )
        )
        targets.append(str(jid))
        jid += 1
    domains = tuple(
        NvlinkDomain(name=d, nodes=tuple(n.name for n in nodes if n.nvlink_domain == d))
        for d in sorted({n.nvlink_domain for n in nodes if n.nvlink_domain})
    )
    snap = ClusterSnapshot(
        cluster=f"tiny-{seed}",
        taken_at=t,
        nodes=tuple(nodes),
        jobs=tuple(jobs),
        nvlink_domains=domains,
    )
    snap = _cap_requeueable(snap, rng)
    # The fairness limits per user (issue #40) from a stream of their own, so the
    # instances above stay as they were; null = no cap, as in a policy file.
    fair = random.Random(seed * 7919 + 2)
    fair_limits = {
        "max_gpu_hours_lost_per_user_per_day": fair.choice((None, 16.0, 2.0, 8.0)),
        "max_requeues_for_user_per_day": fair.choice((None, 16, 0, 1, 2)),
        "max_gpu_hours_lost_for_user_per_day": fair.choice((None, 32.0, 1.0, 4.0)),
    }
    policy = parse_policy(
        {
            "version": 1,
            "protections": {
                "qos": ["prod"] if rng.random() < 0.7 else [],
                "job_names": ["jupyter-*"] if rng.random() < 0.5 else [],
                "min_runtime_minutes": rng.choice((0, 10, 30)),
                "extra": ["multi-node"] if rng.random() < 0.1 else [],
            },
            "limits": {
                k: v
                for k, v in {
                    "max_victims_per_plan": rng.choice((None, 1, 2, 3, 5)),
                    "max_gpu_hours_lost_per_plan": rng.choice((None, None, 5.0, 20.0)),
                    "max_preemptions_per_hour": rng.choice((None, None, 3)),
                    "max_preemptions_per_user_per_day": rng.choice((None, None, 1, 2)),
                }.items()
                if v is not None
            }
            | fair_limits,
            "cost": {
                "restart_cost_gpu_hours": rng.choice((0.0, 0.1, 0.5)),
                "qos_weights": {"low": 0.25},
            },
            "drain": {"enabled": rng.random() < 0.6, "max_wait_hours": rng.choice((1.0, 3.0))},
            "solver": {"num_workers": 1, "max_time_in_seconds": 20, "prune": prune},
        }
    )
    history = InMemoryPreemptionHistory()
    for _ in range(rng.randint(0, 3)):
        history.record_requeue(
            t - timedelta(minutes=rng.uniform(1, 2000)),
            "old",
            rng.choice(users),
            fair.choice((0.0, 0.5, 3.0)),
            fair.sample(users, fair.randint(0, 2)),
        )
    return Instance(snap, policy, targets, history)


def _own_limits(rng: random.Random, names: list[str], n: int) -> dict[str, str]:
    """Sometimes an ``-x`` of one node, sometimes a ``-w`` of the job's ``n`` nodes."""
    roll = rng.random()
    if roll < 0.2:
        return {"excluded_nodes": rng.choice(names)}
    if roll < 0.3 and len(names) >= n:
        return {"required_nodes": ",".join(rng.sample(names, n))}
    return {}


def _cap_requeueable(snap: ClusterSnapshot, rng: random.Random) -> ClusterSnapshot:
    """Keep the brute force fast: make jobs beyond MAX_REQUEUEABLE non-requeueable."""
    running = [j for j in snap.jobs if j.state == JobState.RUNNING and j.requeue]
    if len(running) <= MAX_REQUEUEABLE:
        return snap
    drop = {j.id for j in rng.sample(running, len(running) - MAX_REQUEUEABLE)}
    jobs = tuple(j.model_copy(update={"requeue": False}) if j.id in drop else j for j in snap.jobs)
    return ClusterSnapshot.model_validate(
        {**snap.model_dump(), "jobs": [j.model_dump() for j in jobs]}
    )
