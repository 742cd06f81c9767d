"""The course scenario, hand-computed (see synth.course_scenario).

Job 110 needs 3 NVLink-connected GPUs, any model. Costs are GPU-hours lost (GPUs x hours
since start) plus the policy's restart cost (0.1 per victim by default):

* node01 (NVSwitch): free {6,7}; requeue 104 (2 GPUs x 0.3 h = 0.6) -> {4,5,6,7} free.
* node02: free {1}; requeueing 103 frees only {0,1} (2 GPUs): not enough; the cheapest way
  is requeueing 105 (6 x 5 h = 30).
* node03 (A100 80GB): eligible since 110 names no GPU model; requeue 106 (6 x 2 h = 12).
* node04: NVLink pairs can never form a 3-GPU block.

105, 106 and 101 (4 GPUs) hold 3 GPUs or more of their node: none is ever requeued for
110's 3-GPU share (the swap rule), so in the course itself 104 is the only way. The tests
of the other ways run on ``builders.course_small_victims``: the same costs, held by
2-GPU jobs (101: 2 x 6 h = 12; 105: 2 x 15 h = 30; 106: 2 x 6 h = 12).
"""

from __future__ import annotations

import pytest

from builders import course_small_victims
from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.domain.plan import ActionKind, Plan, apply_plan
from slurm_defrag.domain.topology import BUILTIN_TOPOLOGIES
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.policy.file import default_policy, parse_policy
from slurm_defrag.synth import course_scenario

RESTART = default_policy().cost.restart_cost_gpu_hours


@pytest.fixture(scope="module")
def course() -> ClusterSnapshot:
    return course_scenario()


@pytest.fixture(scope="module")
def plan(course: ClusterSnapshot) -> Plan:
    return make_plan(course, default_policy())


@pytest.fixture(scope="module")
def small() -> ClusterSnapshot:
    return course_small_victims()


def test_requeues_only_104_and_gives_an_nvlink_block_on_node01(plan: Plan) -> None:
    assert plan.status == "ok"
    assert [v.job_id for v in plan.victims] == ["104"]
    (target,) = plan.targets
    assert target.job_id == "110"
    assert target.served
    assert target.mode == "requeue"
    (share,) = target.placements
    assert share.node == "node01"
    assert set(share.gpus) <= {4, 5, 6, 7}
    assert len(share.gpus) == 3
    assert BUILTIN_TOPOLOGIES["nvswitch-8"].is_block(share.gpus)
    # already-free GPUs 6 and 7 are preferred; one of 104's GPUs completes the block
    assert {6, 7} <= set(share.gpus)


def test_cost_is_hand_computed(plan: Plan) -> None:
    (v,) = plan.victims
    assert v.lost_gpu_hours == pytest.approx(2 * 0.3)
    assert plan.total_cost_gpu_hours == pytest.approx(0.6 + RESTART)
    assert plan.solver.status == "OPTIMAL"
    assert plan.solver.optimality == "proven"
    assert plan.solver.gap == 0


def test_explains_node03_and_node04(small: ClusterSnapshot) -> None:
    plan = make_plan(small, default_policy())
    notes = {n.node: n for n in plan.targets[0].node_notes}
    assert notes["node01"].verdict == "chosen"
    n3 = notes["node03"]
    assert n3.verdict == "possible"
    assert "a100-80g" in n3.detail
    assert "asks for no GPU model" in n3.detail
    assert "106" in n3.detail
    assert "12.00 GPU-h" in n3.detail
    assert n3.cost_gpu_hours == pytest.approx(12 + RESTART)
    n4 = notes["node04"]
    assert n4.verdict == "topology"
    assert "never forms an NVLink block of 3" in n4.detail
    assert notes["node02"].cost_gpu_hours == pytest.approx(30 + RESTART)
    assert "node03" in plan.explanation
    assert "node04" in plan.explanation


def test_actions_in_order(plan: Plan) -> None:
    kinds = [a.kind for a in plan.actions]
    assert kinds == [
        ActionKind.RESERVE,
        ActionKind.REQUEUE,
        ActionKind.WAIT_FREE,
        ActionKind.HAND_OVER,
        ActionKind.RELEASE,
    ]
    assert all(a.reason.startswith(f"slurm-defrag:{plan.plan_id}") for a in plan.actions)
    assert plan.actions[0].reservation == f"defrag-{plan.plan_id}"
    assert plan.actions[1].job_id == "104"


def test_apply_plan_frees_victims_and_starts_target(course: ClusterSnapshot, plan: Plan) -> None:
    after = apply_plan(course, plan)
    assert after.job_by_id["104"].state == "PENDING"
    assert not after.job_by_id["104"].gpus
    started = after.job_by_id["110"]
    assert started.state == "RUNNING"
    assert started.gpus == {"node01": frozenset(plan.targets[0].placements[0].gpus)}
    owners = after.gpu_owners["node01"]
    assert owners[:4] == ("101",) * 4
    assert course.job_by_id["104"].state == "RUNNING"  # the input is untouched


def test_protecting_104_moves_the_plan_to_node03(
    course: ClusterSnapshot, small: ClusterSnapshot
) -> None:
    """With 104 protected, requeueing 101 on node01 and 106 on node03 tie exactly (12.10
    GPU-h, one busy GPU each): either is optimal. The answer used to be whichever CP-SAT
    worker finished first; now it is the same every run (see test_planner_determinism).
    In the course itself no other way is left (101 and 106 are larger than the share)."""
    policy = parse_policy({"version": 1, "protections": {"users": ["erin"]}})
    assert not make_plan(course, policy).victims
    p = make_plan(small, policy)
    tied = {("101", "node01"), ("106", "node03")}
    assert next((v.job_id, p.targets[0].placements[0].node) for v in p.victims) in tied
    assert len(p.victims) == 1
    assert p.total_cost_gpu_hours == pytest.approx(12.1)


def test_everything_protected_is_explained(course: ClusterSnapshot) -> None:
    policy = parse_policy({"version": 1, "protections": {"qos": ["normal"]}})
    p = make_plan(course, policy)
    assert p.status == "empty"
    assert not p.victims
    assert not p.actions
    text = p.targets[0].explanation
    assert "candidate victims are protected" in text
    assert "QOS=normal" in text


def test_victim_limit_is_explained(course: ClusterSnapshot) -> None:
    policy = parse_policy({"version": 1, "limits": {"max_victims_per_plan": 0}})
    p = make_plan(course, policy)
    assert not p.targets[0].served
    assert "max_victims_per_plan allows 0" in p.targets[0].explanation


def test_checkpoint_lowers_the_cost(small: ClusterSnapshot) -> None:
    jobs = []
    for j in small.jobs:
        if j.id == "106":  # checkpointed 18 minutes ago: 2 GPUs x 0.3 h = 0.6 GPU-h lost
            j = j.model_copy(update={"comment": "defrag:ckpt=2026-11-29T11:42:00Z"})
        if j.id == "104":
            j = j.model_copy(update={"requeue": False})
        jobs.append(j)
    snap = ClusterSnapshot.model_validate(
        {**small.model_dump(), "jobs": [j.model_dump() for j in jobs]}
    )
    p = make_plan(snap, default_policy())
    (v,) = p.victims
    assert v.job_id == "106"
    assert v.since_source == "checkpoint"
    assert v.lost_gpu_hours == pytest.approx(0.6)


def test_concurrent_plan_limit_refuses(course: ClusterSnapshot) -> None:
    from slurm_defrag.policy.limits import InMemoryPreemptionHistory

    h = InMemoryPreemptionHistory()
    h.start_plan("other")
    p = make_plan(course, default_policy(), history=h)
    assert p.status == "refused"
    assert "max_concurrent_plans" in p.reason


def _with(course: ClusterSnapshot, **updates: dict[str, object]) -> ClusterSnapshot:
    jobs = [j.model_copy(update=updates[j.id]) if j.id in updates else j for j in course.jobs]
    return ClusterSnapshot.model_validate(
        {**course.model_dump(), "jobs": [j.model_dump() for j in jobs]}
    )


def test_the_plan_names_the_protection_that_excluded_a_cheaper_set(
    small: ClusterSnapshot,
) -> None:
    """104 opts out (defrag:protect): the plan costs 12.10 (requeue 101 or 106), and it
    says that requeueing 104 on node01 would have cost 0.70, and which protection stopped it."""
    snap = _with(small, **{"104": {"admin_comment": "defrag:protect"}})
    p = make_plan(snap, default_policy())
    (v,) = p.victims
    assert v.cost_gpu_hours == pytest.approx(12.1)
    text = p.targets[0].explanation
    assert (
        "Protections excluded a cheaper set: requeueing 104 on node01 would cost 0.70 GPU-h, "
        "against 12.10 in this plan; protected: job 104 by owner opted out (defrag:protect)."
    ) in text


def test_no_protection_note_when_nothing_cheaper_was_excluded(course: ClusterSnapshot) -> None:
    # 105 (30 GPU-h on node02) is protected, but the plan's 0.70 is cheaper anyway.
    p = make_plan(_with(course, **{"105": {"admin_comment": "defrag:protect"}}), default_policy())
    assert "Protections excluded" not in p.targets[0].explanation
    # Requeue=0 is never waivable: not offered as a cheaper set either.
    p = make_plan(_with(course, **{"104": {"requeue": False}}), default_policy())
    assert "Protections excluded" not in p.targets[0].explanation


def test_an_unserved_target_gets_the_cost_of_its_protected_set(course: ClusterSnapshot) -> None:
    protect = {"admin_comment": "defrag:protect"}
    snap = _with(course, **dict.fromkeys(("101", "103", "104", "105", "106"), protect))
    p = make_plan(snap, default_policy())
    assert not p.targets[0].served
    text = p.targets[0].explanation
    assert "Protections excluded a cheaper set: requeueing 104 on node01 would cost 0.70" in text
    assert "against" not in text
