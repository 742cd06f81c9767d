"""Policy file loading: versioned, every error reported at once, each naming its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_defrag.errors import InputError
from slurm_defrag.policy.file import default_policy, load_policy, parse_policy
from slurm_defrag.policy.protections import DEFAULT_PROTECTIONS, Protection

ROOT = Path(__file__).resolve().parents[2]


def test_example_policy_loads() -> None:
    p = load_policy(ROOT / "examples" / "policy.toml")
    assert p.version == 1
    assert p.protections.qos == ["prod", "urgent"]
    assert p.limits.max_victims_per_plan == 8
    assert [s.name for s in p.strategies] == ["free-nvlink-block"]
    assert len(p.build_strategies()) == 1


def test_defaults() -> None:
    p = default_policy()
    assert p.protections.enabled == DEFAULT_PROTECTIONS
    assert p.solver.num_workers == 2


def test_all_errors_at_once_with_keys() -> None:
    with pytest.raises(InputError) as e:
        parse_policy({
            "version": 1,
            "limits": {"max_victims_per_plan": -1},
            "protections": {"extra": ["no-checkpoint", "foo"], "disable": ["qos", "qos"]},
            "strategies": [{"name": "free-nvlink-block", "args": {"max_targets": 0}},
                           {"name": "nope"}],
            "typo": 1,
        }, "policy.toml")
    msg = str(e.value)
    assert msg.startswith("policy.toml: ")
    for part in (
        "limits.max_victims_per_plan: must be >= 0",
        "protections.extra[1]: unknown protection 'foo', must be one of multi-node, "
        "no-checkpoint",
        "protections.disable: 'qos' listed twice",
        "strategies[0].args.max_targets: must be >= 1",
        "strategies[1].name: unknown strategy 'nope', must be one of free-nvlink-block",
        "typo: unknown key",
    ):
        assert part in msg


@pytest.mark.parametrize(("data", "expected"), [
    ({}, "version: required"),
    ({"version": 2}, "version: this slurm-defrag reads version = 1, found 2"),
    ({"version": 1, "protections": {"disable": ["multi-node"]}},
     "protections.disable[0]: 'multi-node' is an extra protection"),
    ({"version": 1, "protections": {"extra": ["qos"]}},
     "protections.extra[0]: 'qos' is a default protection"),
    ({"version": 1, "solver": {"num_workers": 0}}, "solver.num_workers: must be >= 1"),
    ({"version": 1, "drain": {"max_wait_hours": -1}}, "drain.max_wait_hours: must be >= 0"),
])
def test_single_errors(data: dict[str, object], expected: str) -> None:
    with pytest.raises(InputError, match=None) as e:
        parse_policy(data, "p.toml")
    assert expected in str(e.value)


def test_toml_syntax_error(tmp_path: Path) -> None:
    f = tmp_path / "bad.toml"
    f.write_text("version = \n")
    with pytest.raises(InputError, match="not valid TOML"):
        load_policy(f)


def test_yaml(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text("version: 1\nprotections:\n  extra: [no-checkpoint]\n")
    p = load_policy(f)
    assert Protection.NO_CHECKPOINT in p.protections.enabled


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_policy(tmp_path / "none.toml")
