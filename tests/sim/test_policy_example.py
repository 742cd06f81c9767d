"""examples/policy-large-jobs.toml is what the one configuration's ``[defrag]`` measures,
and examples/policy-site-priorities.toml what examples/profiles/site-priorities.toml's does.

The simulator builds its planner policy in code (``sim/planner_step.py``) from the
profile's step and limits (examples/profiles/one-configuration.toml: ``planner-gain``, at
most 4 GPU-h lost, 0.5 h holds); a site's service reads the policy file the same profile
names. The figures credited to the configuration hold for a site only if the file says the
same: cost weights, lost-work cap, hold horizon. The large-job rule (no
victim of 4+ GPUs, targets of 4+ GPUs) is the simulator's ``min_gpus`` / ``keep_gpus``
and the file's ``large-job`` protection and ``min_gpus_per_node``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_defrag.policy.file import load_policy
from slurm_defrag.policy.free_nvlink_block import FreeNvlinkBlockArgs
from slurm_defrag.policy.protections import Protection
from slurm_defrag.sim.planner_step import PlannerStep, make_step
from slurm_defrag.sim.profile import load_profile
from slurm_defrag.sim.protocol_b import LARGE_GPUS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("profile_name", "policy_name"),
    [
        ("one-configuration.toml", "policy-large-jobs.toml"),
        ("site-priorities.toml", "policy-site-priorities.toml"),
    ],
)
def test_the_example_is_the_simulated_policy(profile_name: str, policy_name: str) -> None:
    profile = load_profile(EXAMPLES / "profiles" / profile_name)
    assert profile.defrag.policy is not None
    assert profile.defrag.policy.resolve() == EXAMPLES / policy_name
    site = load_policy(profile.defrag.policy)
    step = make_step(profile.defrag.step, profile.defrag.limits)
    assert isinstance(step, PlannerStep)
    sim = step._policy
    assert site.cost == sim.cost
    assert site.drain == sim.drain
    assert site.limits.max_gpu_hours_lost_per_plan == sim.limits.max_gpu_hours_lost_per_plan
    assert Protection.LARGE_JOB in site.protections.enabled
    assert site.protections.large_job_gpus == LARGE_GPUS == step.min_gpus == step.keep_gpus
    (spec,) = site.strategies
    args = FreeNvlinkBlockArgs.model_validate(spec.args)
    assert args.min_gpus_per_node == LARGE_GPUS
    # targets only at the head of the queue: the same number in both (issue #41)
    assert args.queue_head == step.queue_head
