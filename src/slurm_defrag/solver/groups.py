"""Interchangeable targets: one set of decision variables per group, not per target.

Targets of one demand class (same partition, model, shape, CPUs and memory) have the very
same candidate placements after pruning (``planner/candidates.py`` keeps the same nodes and
blocks for the whole class). A per-target model then has one ``take`` variable per target
*and* placement: 500 targets x 550 kept nodes on the 10,000-node benchmark, most of it
copies, and the copies are symmetric (swap two members' placements: same cost), which is
what keeps CP-SAT from proving anything. The model instead decides per group which
placements are taken and how many members are served; :func:`deal` then gives the taken
placements to the served members, highest value first.

A group with multi-node members also needs each member's shares on distinct nodes: the
model caps the shares of the group on one node at the number of members served, and
dealing the shares node by node, round robin, then never gives a member two shares of one
node (a node's ``c <= served`` shares go to ``c`` consecutive, hence distinct, members).

Targets of a user whose beneficiary budget may bind (``LimitData.served_caps``) are only
grouped with that user's: which member gets a placement would otherwise decide whose
budget its victims spend.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurm_defrag.solver.problem import ProblemData


@dataclass(frozen=True)
class Groups:
    members: tuple[tuple[int, ...], ...]
    """Per group: its targets, highest value first (ties: lower index first)."""
    group_of: tuple[int, ...]
    """Per target: its group."""
    live: tuple[int, ...]
    """The options that carry variables: those of each group's first member."""
    alias: tuple[int, ...]
    """Per option: the live option with the same placement in its group."""


def _signature(data: ProblemData, o: int) -> tuple[object, ...]:
    x = data.options[o]
    return (x.node, x.mask, x.kind, x.victims, x.busy, x.drain_cost, x.wait_s, x.blockers)


def find_groups(data: ProblemData) -> Groups:
    by_key: dict[tuple[object, ...], list[int]] = {}
    sigs: list[tuple[tuple[object, ...], ...]] = []
    for t, target in enumerate(data.targets):
        sig = tuple(sorted(_signature(data, o) for o in data.target_options[t]))
        sigs.append(sig)
        if target.same_domain:  # domain variables are per target: never grouped
            key: tuple[object, ...] = ("alone", t)
        else:
            # A user with a beneficiary cap: the group's placements are then all theirs,
            # so its taken victims count against them alone (model ``_served_caps``).
            owner = target.user if data.target_cap[t] is not None else None
            key = (target.nodes, target.gpus_per_node, target.cpus, target.memory, owner, sig)
        by_key.setdefault(key, []).append(t)
    groups = sorted(by_key.values(), key=lambda ts: min(ts))
    members = tuple(tuple(sorted(ts, key=lambda t: (-data.targets[t].value, t))) for ts in groups)
    group_of = [0] * len(data.targets)
    for g, ts in enumerate(members):
        for t in ts:
            group_of[t] = g
    alias = list(range(len(data.options)))
    live: list[int] = []
    for ts in members:
        lead = ts[0]
        where = {_signature(data, o): o for o in data.target_options[lead]}
        live.extend(data.target_options[lead])
        for t in ts[1:]:
            for o in data.target_options[t]:
                alias[o] = where[_signature(data, o)]
    return Groups(members, tuple(group_of), tuple(sorted(live)), tuple(alias))


def deal(data: ProblemData, groups: Groups, served: set[int], taken_live: list[int]) -> list[int]:
    """Per-target option indices for the group-level solution: each group's taken
    placements, node by node (then GPUs), dealt round robin to its served members."""
    out: list[int] = []
    by_group: dict[int, list[int]] = {}
    for o in taken_live:
        by_group.setdefault(groups.group_of[data.options[o].target], []).append(o)
    for g, opts in sorted(by_group.items()):
        ts = [t for t in groups.members[g] if t in served]
        if not ts:  # placements without a served member: not a plan the model allows
            continue
        opts.sort(key=lambda o: (data.options[o].node, data.options[o].mask, data.options[o].kind))
        for i, o in enumerate(opts):
            t = ts[i % len(ts)]
            if t == groups.members[g][0]:
                out.append(o)
                continue
            sig = _signature(data, o)
            out.append(next(p for p in data.target_options[t] if _signature(data, p) == sig))
    return sorted(out)
