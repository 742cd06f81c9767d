"""Issue #40: a job whose Slurm record did not read whole is out of planning.

On the course scenario (synth.course_scenario: the plan requeues 104 so that 110 gets an
NVLink block): 104 unreadable is never a victim (always-on protection ``unreadable-record``,
whatever the policy disables), 110 unreadable is never a target, and asking for it says why.
"""

from __future__ import annotations

import pytest

from builders import course_small_victims, unreadable
from slurm_defrag.errors import InputError
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.policy.file import Policy, default_policy, parse_policy
from slurm_defrag.policy.protections import DEFAULT_PROTECTIONS
from slurm_defrag.synth import course_scenario

TIME = "time: squeue --json: jobs[3].submit_time: time out of range: 99999999999999"
REQUEST = "gres_request: squeue --json: jobs[9].tres_per_node: cannot parse GRES item 'x:y:z'"


def test_course_plan_requeues_104() -> None:
    """The baseline the tests below change."""
    plan = make_plan(course_scenario(), default_policy())
    assert [v.job_id for v in plan.victims] == ["104"]
    assert [t.job_id for t in plan.targets] == ["110"]


ALL_DEFAULTS_OFF = parse_policy(
    {"version": 1, "protections": {"disable": sorted(p.value for p in DEFAULT_PROTECTIONS)}}
)
"""Every default protection off: the unreadable record's is not among them."""


@pytest.mark.parametrize(
    "policy", [default_policy(), ALL_DEFAULTS_OFF], ids=["default", "defaults-disabled"]
)
def test_an_unreadable_running_job_is_never_a_victim(policy: Policy) -> None:
    # the course's other ways requeue jobs larger than 110's share: never (the swap rule);
    # this variant has them smaller, at the same costs
    snap = unreadable(course_small_victims(), "104", TIME)
    assert snap.job_by_id["104"].holds_gpus  # its allocation read: it could be a victim
    plan = make_plan(snap, policy)
    assert plan.victims
    assert "104" not in {v.job_id for v in plan.victims}
    assert "104" not in {a.job_id for a in plan.actions}
    # the explanation says what the protection cost, and why
    assert "protected: job 104 by record unreadable (time)" in plan.targets[0].explanation


def test_an_unreadable_pending_job_is_never_a_target() -> None:
    snap = unreadable(course_scenario(), "110", REQUEST)
    plan = make_plan(snap, default_policy())
    assert not plan.targets
    assert not plan.actions


def test_asking_to_plan_for_an_unreadable_job_says_why() -> None:
    snap = unreadable(course_scenario(), "110", REQUEST)
    with pytest.raises(InputError) as info:
        make_plan(snap, default_policy(), targets=["110"])
    message = str(info.value)
    assert message.startswith("--target 110: its Slurm record could not be read whole")
    assert "gres_request: " in message
