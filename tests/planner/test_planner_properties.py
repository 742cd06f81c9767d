"""Properties every plan has, on random instances (hypothesis draws the seeds).

Never a protected victim, never a broken limit, every share a valid block (NVLink-connected
where asked), no GPU given twice or taken from a job that keeps running, victims whole, no
victim as large on its node as the shares it is requeued for there (the swap rule).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from planner_instances import random_instance

from slurm_defrag.actuator.limits import plan_violations, victim_refs
from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.domain.plan import Plan, apply_plan
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.policy.protections import compile_protections, movable


def check_invariants(snap: ClusterSnapshot, plan: Plan, inst: object) -> None:
    from planner_instances import Instance

    assert isinstance(inst, Instance)
    now = snap.taken_at
    protector = compile_protections(inst.policy.protections, now)
    victims = {v.job_id for v in plan.victims}
    for v in plan.victims:
        job = snap.job_by_id[v.job_id]
        assert movable(job), v.job_id
        assert not protector.reasons(job), v.job_id
        assert v.gpus == {n: tuple(sorted(i)) for n, i in job.gpus.items()}  # whole job
    # victim_refs: with the users each requeue is for (the beneficiary limits, issue #40)
    assert not plan_violations(victim_refs(plan), inst.policy.limits, inst.history, now)

    owners = snap.gpu_owners
    given: set[tuple[str, int]] = set()
    drained: set[str] = set()
    for t in plan.targets:
        if not t.served:
            assert not t.placements
            continue
        job = snap.job_by_id[t.job_id]
        assert job.request is not None
        shape = job.request.per_node_shape()
        assert shape is not None
        n_nodes, k = shape
        assert len({p.node for p in t.placements}) == len(t.placements) == n_nodes
        for p in t.placements:
            node = snap.node_by_name[p.node]
            assert node.available
            topo = snap.topology_of(node)
            if job.request.whole_node:
                assert set(p.gpus) == set(range(node.gpu_count))
            else:
                assert len(p.gpus) == k
                if job.request.nvlink and k > 1:
                    assert topo.is_block(p.gpus)
            if job.request.gpu_model is not None:
                assert node.gpu_model == job.request.gpu_model
            for g in p.gpus:
                assert (p.node, g) not in given, "GPU given twice"
                given.add((p.node, g))
                owner = owners[p.node][g]
                if p.mode == "drain":
                    assert owner is None or owner in p.blockers
                else:
                    assert owner is None or owner in victims, "GPU of a job that keeps running"
            if p.mode == "drain":
                drained.add(p.node)
    for t in plan.targets:
        for p in t.placements:
            if p.node in drained:
                assert p.mode == "drain"
    # the swap rule: a victim holds fewer GPUs on a node than the plan's shares there take
    taken: dict[str, int] = {}
    for t in plan.targets:
        for p in t.placements:
            taken[p.node] = taken.get(p.node, 0) + len(p.gpus)
    for t in plan.targets:
        for p in t.placements:
            for v in p.victims:
                assert len(snap.job_by_id[v].gpus[p.node]) < taken[p.node], "a swap"
    apply_plan(snap, plan)  # the "after" snapshot must validate (no double booking)


@settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(seed=st.integers(min_value=10_000, max_value=10**9), pruned=st.booleans())
def test_plans_respect_policy_and_topology(seed: int, pruned: bool) -> None:
    inst = random_instance(seed, "always" if pruned else "never")
    plan = make_plan(inst.snapshot, inst.policy, inst.targets, inst.history)
    check_invariants(inst.snapshot, plan, inst)
