"""Split a problem into independent parts: targets that share no node and no victim.

Targets of different partitions, GPU models or NVLink domains usually fall apart here. The
parts are solved one by one; limits couple them again, which the planner handles by
checking the combined result (see :mod:`slurm_defrag.planner.facade`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from slurm_defrag.solver.problem import LimitData, OptionData, ProblemData


@dataclass(frozen=True)
class Part:
    data: ProblemData
    targets: tuple[int, ...]
    options: tuple[int, ...]
    jobs: tuple[int, ...]


def split(data: ProblemData) -> list[Part]:
    parent = list(range(len(data.targets)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    first_on: dict[tuple[str, int], int] = {}
    # Members of a class carry copies of the same placements (228,000 options, 500
    # targets on the 10,000-node bench): a placement's keys are walked once, a copy only
    # joins its target to the first target seen with it (same sets: the key's first
    # target is already joined to that one).
    first_with: dict[tuple[int, tuple[int, ...]], int] = {}
    for o in data.options:
        seen = first_with.setdefault((o.node, o.victims), o.target)
        if seen != o.target:
            union(seen, o.target)
            continue
        keys = [("n", o.node)] + [("j", j) for j in o.victims]
        # A victim frees GPUs on all its nodes: those nodes connect the targets too.
        keys += [("n", n) for j in o.victims for n, _ in data.jobs[j].gpus]
        for key in keys:
            other = first_on.setdefault(key, o.target)
            union(other, o.target)
    groups: dict[int, list[int]] = {}
    for t in range(len(data.targets)):
        groups.setdefault(find(t), []).append(t)
    parts = [ts for _, ts in sorted(groups.items())]
    if sum(1 for ts in parts if any(data.target_options[t] for t in ts)) <= 1:
        # At most one part has anything to decide (the 10,000-node bench: one part of 446
        # targets and 54 targets without options): the whole problem is that part, and
        # copying its 228,000 options cost 3 s. Targets without options are just unserved.
        n = len(data.targets)
        return [
            Part(
                data, tuple(range(n)), tuple(range(len(data.options))), tuple(range(len(data.jobs)))
            )
        ]
    return [_part(data, ts) for ts in parts]


def _part(data: ProblemData, targets: list[int]) -> Part:
    t_new = {t: i for i, t in enumerate(targets)}
    opts = [i for t in targets for i in data.target_options[t]]
    jobs = sorted({j for i in opts for j in data.options[i].victims})
    j_new = {j: i for i, j in enumerate(jobs)}
    nodes = sorted(
        {data.options[i].node for i in opts} | {n for j in jobs for n, _ in data.jobs[j].gpus}
    )
    n_new = {n: i for i, n in enumerate(nodes)}
    users = sorted({data.jobs[j].user for j in jobs})
    u_new = {u: i for i, u in enumerate(users)}
    sub = ProblemData(
        targets=tuple(data.targets[t] for t in targets),
        nodes=tuple(data.nodes[n] for n in nodes),
        jobs=tuple(
            replace(
                data.jobs[j],
                user=u_new[data.jobs[j].user],
                gpus=tuple((n_new[n], m) for n, m in data.jobs[j].gpus),
            )
            for j in jobs
        ),
        users=tuple(data.users[u] for u in users),
        options=tuple(
            OptionData(
                t_new[o.target],
                n_new[o.node],
                o.mask,
                o.kind,
                tuple(j_new[j] for j in o.victims),
                o.busy,
                o.drain_cost,
                o.wait_s,
                o.blockers,
            )
            for o in (data.options[i] for i in opts)
        ),
        limits=LimitData(),
        domains=data.domains,
    )
    return Part(sub, tuple(targets), tuple(opts), tuple(jobs))
