"""The demo's profiles: the measured policy ships in the package, unchanged."""

from __future__ import annotations

import pytest

from infra import EXAMPLES
from slurm_defrag.demo.profiles import DEFAULT, PROFILES, profile
from slurm_defrag.errors import InputError
from slurm_defrag.policy.file import load_policy
from slurm_defrag.policy.protections import Protection


def test_large_jobs_is_the_example_policy_byte_for_byte() -> None:
    """A pip install has no examples/: the package carries a copy, which must not drift
    from the file the README and the simulator's measurements name."""
    with profile("large-jobs").policy_path() as path:
        assert path is not None
        assert path.read_bytes() == (EXAMPLES / "policy-large-jobs.toml").read_bytes()
        policy = load_policy(path)
    assert Protection.LARGE_JOB in policy.protections.enabled
    assert profile("large-jobs").packing_lever == "shape-weights"


def test_default_is_what_serve_runs_without_a_policy_file() -> None:
    with profile("default").policy_path() as path:
        assert path is None
    assert profile("default").packing_lever is None
    assert DEFAULT in PROFILES


def test_an_unknown_profile_names_the_choices() -> None:
    with pytest.raises(InputError, match="large-jobs, default"):
        profile("huge-jobs")
