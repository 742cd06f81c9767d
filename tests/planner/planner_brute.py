"""Brute-force optimum of a planning instance, written apart from the solver.

It shares only the *specification* with the planner: which jobs policy protects
(``compile_protections``), what a requeue costs (``victim_cost``), target values
(``target_specs``), and which nodes may ever host a share (the metrics'
``structural_verdict``). Feasibility -- blocks, disjointness, drains, domains, limits -- is
re-implemented here in the plainest way: enumerate every set of victims, then every way to
place the targets on the GPUs that set frees. The beneficiary limits (per target user) are
checked while placing: a block counts the holders of its GPUs against its target's user.
The swap rule is checked on each complete placement: per node, every holder of a placed
block's GPUs holds fewer GPUs there than the blocks placed on that node take together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from itertools import chain, combinations

from slurm_defrag.domain.cluster import UNKNOWN_OWNER, ClusterSnapshot, JobState
from slurm_defrag.domain.job_limits import job_limits
from slurm_defrag.domain.topology import GpuTopology
from slurm_defrag.metrics.fit import structural_verdict
from slurm_defrag.planner.build import target_specs
from slurm_defrag.policy.cost import to_milli, victim_cost
from slurm_defrag.policy.file import Policy
from slurm_defrag.policy.limits import PreemptionHistory
from slurm_defrag.policy.protections import compile_protections


@dataclass(frozen=True)
class Best:
    value: int
    cost: int  # milli-GPU-hours


def _gpu_sets(topo: GpuTopology, k: int, kind: str) -> list[frozenset[int]]:
    n = topo.gpu_count
    if k > n:
        return []
    if kind == "whole":
        return [frozenset(range(n))]
    out = [frozenset(c) for c in combinations(range(n), k)]
    if kind == "nvlink":
        out = [c for c in out if topo.is_block(c)]
    return out


def brute_force(
    snapshot: ClusterSnapshot, policy: Policy, target_ids: list[str], history: PreemptionHistory
) -> Best:
    now = snapshot.taken_at
    protector = compile_protections(policy.protections, now)
    jobs = [snapshot.job_by_id[t] for t in target_ids]
    specs, _ = target_specs(snapshot, jobs)
    owners = snapshot.gpu_owners

    # which nodes each target may use, and its share shapes there
    eligible: list[list[str]] = []
    for s in specs:
        names = []
        for node in snapshot.nodes:
            if node.gpu_count == 0:
                continue
            if structural_verdict(node, snapshot.topology_of(node), s.item) is not None:
                continue
            if s.same_domain and node.nvlink_domain is None:
                continue
            if not job_limits(s.job, s.nodes).admits(node):
                continue
            names.append(node.name)
        eligible.append(names)
    useful_nodes = set(chain.from_iterable(eligible))

    requeueable = []
    for job in snapshot.jobs:
        if job.state != JobState.RUNNING or not job.gpus or protector.reasons(job):
            continue
        if useful_nodes & set(job.gpus):
            requeueable.append(job)
    cost = {j.id: to_milli(victim_cost(j, now, policy.cost).cost) for j in requeueable}
    lost = {j.id: to_milli(victim_cost(j, now, policy.cost).lost_gpu_hours) for j in requeueable}
    lim = policy.limits

    def limits_ok(victims: tuple[str, ...]) -> bool:
        n = len(victims)
        if lim.max_victims_per_plan is not None and n > lim.max_victims_per_plan:
            return False
        if (
            lim.max_preemptions_per_hour is not None
            and history.preemptions_since(now - timedelta(hours=1)) + n
            > lim.max_preemptions_per_hour
        ):
            return False
        if lim.max_gpu_hours_lost_per_plan is not None and sum(lost[v] for v in victims) > to_milli(
            lim.max_gpu_hours_lost_per_plan
        ):
            return False
        if lim.max_preemptions_per_user_per_day is not None:
            users: dict[str, int] = {}
            for v in victims:
                u = snapshot.job_by_id[v].user
                users[u] = users.get(u, 0) + 1
            for u, k in users.items():
                if (
                    history.user_preemptions_since(u, now - timedelta(days=1)) + k
                    > lim.max_preemptions_per_user_per_day
                ):
                    return False
        if lim.max_gpu_hours_lost_per_user_per_day is not None:
            hours: dict[str, int] = {}
            for v in victims:
                u = snapshot.job_by_id[v].user
                hours[u] = hours.get(u, 0) + lost[v]
            for u, h in hours.items():
                past = history.victim_usage(u, now - timedelta(days=1)).gpu_hours
                if h > to_milli(max(0.0, lim.max_gpu_hours_lost_per_user_per_day - past)):
                    return False
        return True

    # the beneficiary side: what requeues of other users' jobs for one user's targets may
    # still spend (requeues, milli-GPU-hours; None: no cap)
    left: dict[str, tuple[int | None, int | None]] = {}
    fc, fl = lim.max_requeues_for_user_per_day, lim.max_gpu_hours_lost_for_user_per_day
    if fc is not None or fl is not None:
        for s in specs:
            used = history.beneficiary_usage(s.job.user, now - timedelta(days=1))
            left[s.job.user] = (
                None if fc is None else max(0, fc - used.requeues),
                None if fl is None else to_milli(max(0.0, fl - used.gpu_hours)),
            )
    served = _Served(left, {j.id: j.user for j in requeueable}, lost)

    # drain: per (target, node) the cheapest block that frees itself in time
    def end_hours(node: str, g: int) -> float | None:
        o = owners[node][g]
        if o is None:
            return 0.0
        if o == UNKNOWN_OWNER:
            return None
        job = snapshot.job_by_id[o]
        if job.start_time is None or job.time_limit_s is None:
            return None
        return max(0.0, (job.start_time - now).total_seconds() / 3600 + job.time_limit_s / 3600)

    drain: dict[tuple[int, str], tuple[int, frozenset[int]]] = {}
    if policy.drain.enabled:
        for t, s in enumerate(specs):
            for name in eligible[t]:
                node = snapshot.node_by_name[name]
                ends = [end_hours(name, g) for g in range(node.gpu_count)]
                for b in _gpu_sets(snapshot.topology_of(node), s.geometry.k, s.geometry.kind):
                    if any(
                        ends[g] is None or ends[g] > policy.drain.max_wait_hours  # type: ignore[operator]
                        for g in b
                    ):
                        continue
                    if all(owners[name][g] is None for g in b):
                        continue
                    wait = max(ends[g] for g in b)  # type: ignore[type-var]
                    idle = sum(max(0.0, wait - e) for e in ends if e is not None)
                    c = to_milli(idle)
                    if (t, name) not in drain or c < drain[(t, name)][0]:
                        drain[(t, name)] = (c, b)

    best = Best(0, 0)
    everything = sum(s.value for s in specs)
    subsets = [
        tuple(j.id for j in combo)
        for r in range(len(requeueable) + 1)
        for combo in combinations(requeueable, r)
    ]
    subsets.sort(key=lambda vs: sum(cost[v] for v in vs))  # cheapest first
    for victims in subsets:
        base = sum(cost[v] for v in victims)
        if best.value == everything and base >= best.cost:
            break  # every target served already, and no dearer set can beat it
        if not limits_ok(victims):
            continue
        avail = {
            n.name: {g for g, o in enumerate(owners[n.name]) if o is None or o in victims}
            for n in snapshot.nodes
        }
        value, extra = _pack(snapshot, specs, eligible, avail, drain, served)
        cand = Best(value, base + extra)
        if (cand.value, -cand.cost) > (best.value, -best.cost):
            best = cand
    return best


@dataclass
class _Served:
    """Victims counted against each target user's beneficiary budget while packing: the
    holders of a block's GPUs that are not the target's user's own (drains count none)."""

    left: dict[str, tuple[int | None, int | None]]
    owner_user: dict[str, str]
    lost: dict[str, int]
    held: dict[str, dict[str, int]] = field(default_factory=dict)
    """user -> job -> blocks of theirs it is counted for"""

    def add(self, user: str, jobs: list[str]) -> bool:
        """Count ``jobs`` for ``user``; False (nothing counted) if over budget."""
        if user not in self.left:
            return True
        mine = self.held.setdefault(user, {})
        others = [j for j in jobs if self.owner_user[j] != user]
        new = {j for j in others if j not in mine}
        n_cap, h_cap = self.left[user]
        if n_cap is not None and len(mine) + len(new) > n_cap:
            return False
        if h_cap is not None and sum(self.lost[j] for j in (*mine, *new)) > h_cap:
            return False
        for j in others:
            mine[j] = mine.get(j, 0) + 1
        return True

    def remove(self, user: str, jobs: list[str]) -> None:
        if user not in self.left:
            return
        mine = self.held[user]
        for j in jobs:
            if self.owner_user[j] != user:
                mine[j] -= 1
                if not mine[j]:
                    del mine[j]


def _pack(snapshot, specs, eligible, avail, drain, served):  # type: ignore[no-untyped-def]
    """Max value, then min drain cost, of placing targets on ``avail`` GPUs."""
    owners = snapshot.gpu_owners
    best = [0, 0]
    used: dict[str, set[int]] = {n: set() for n in avail}
    drained: set[str] = set()
    hosting: dict[str, int] = dict.fromkeys(avail, 0)
    # the swap rule: per node, the holders of placed (requeue) blocks' GPUs, with how
    # many blocks free each, and the GPUs those blocks take together
    freed_on: dict[str, dict[str, int]] = {n: {} for n in avail}
    held = {(n, o): owners[n].count(o) for n in avail for o in set(owners[n]) if o is not None}

    def no_swap() -> bool:
        return all(held[(n, j)] < len(used[n]) for n, js in freed_on.items() for j in js)

    def rec(t: int, value: int, dcost: int) -> None:
        if value + sum(s.value for s in specs[t:]) < best[0]:
            return  # cannot reach the best value any more
        if t == len(specs):
            if not no_swap():
                return
            if (value, -dcost) > (best[0], -best[1]):
                best[0], best[1] = value, dcost
            return
        s = specs[t]
        for group in combinations(eligible[t], s.nodes):
            if s.same_domain and len({snapshot.node_by_name[n].nvlink_domain for n in group}) != 1:
                continue
            place(t, group, 0, value, dcost)
        rec(t + 1, value, dcost)  # target t not served

    def place(t: int, group: tuple[str, ...], i: int, value: int, dcost: int) -> None:
        s = specs[t]
        if i == len(group):
            rec(t + 1, value + s.value, dcost)
            return
        name = group[i]
        if name in drained:
            return
        node = snapshot.node_by_name[name]
        for b in _gpu_sets(snapshot.topology_of(node), s.geometry.k, s.geometry.kind):
            if b <= avail[name] and not b & used[name]:
                freed = sorted({o for g in b if (o := owners[name][g]) is not None})
                if not served.add(s.job.user, freed):
                    continue
                used[name] |= b
                hosting[name] += 1
                for j in freed:
                    freed_on[name][j] = freed_on[name].get(j, 0) + 1
                place(t, group, i + 1, value, dcost)
                for j in freed:
                    freed_on[name][j] -= 1
                    if not freed_on[name][j]:
                        del freed_on[name][j]
                hosting[name] -= 1
                used[name] -= b
                served.remove(s.job.user, freed)
        d = drain.get((t, name))
        if d is not None and hosting[name] == 0:
            drained.add(name)
            hosting[name] += 1
            place(t, group, i + 1, value, dcost + d[0])
            hosting[name] -= 1
            drained.discard(name)

    rec(0, 0, 0)
    return best[0], best[1]


def plan_value_cost(plan) -> Best:  # type: ignore[no-untyped-def]
    value = sum(t.value for t in plan.targets if t.served)
    c = sum(to_milli(v.cost_gpu_hours) for v in plan.victims) + sum(
        round(p.idle_gpu_hours * 1000) for t in plan.targets for p in t.placements
    )
    return Best(value, c)
