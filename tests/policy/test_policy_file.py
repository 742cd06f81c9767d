"""Policy file loading: versioned, every error reported at once, each naming its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_defrag.errors import InputError
from slurm_defrag.policy.file import default_policy, load_policy, parse_policy
from slurm_defrag.policy.protections import (
    DEFAULT_PROTECTIONS,
    MANDATORY_PROTECTIONS,
    Protection,
)

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
    assert p.protections.enabled == DEFAULT_PROTECTIONS | MANDATORY_PROTECTIONS
    assert p.solver.num_workers == 2


FAIRNESS_DEFAULTS = {
    "max_preemptions_per_user_per_day": 8,
    "max_gpu_hours_lost_per_user_per_day": 64.0,
    "max_requeues_for_user_per_day": 16,
    "max_gpu_hours_lost_for_user_per_day": 128.0,
}
"""The per-user limits' documented defaults (docs/planner.md, "Fairness per user")."""


def test_per_user_limits_have_their_documented_defaults() -> None:
    limits = default_policy().limits.model_dump()
    assert {k: limits[k] for k in FAIRNESS_DEFAULTS} == FAIRNESS_DEFAULTS
    # the example policy spells them out with the same values
    example = load_policy(ROOT / "examples" / "policy.toml").limits.model_dump()
    assert {k: example[k] for k in FAIRNESS_DEFAULTS} == FAIRNESS_DEFAULTS


def test_per_user_limits_parse_and_null_is_unlimited(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        "version = 1\n[limits]\nmax_gpu_hours_lost_per_user_per_day = 4.5\n"
        "max_requeues_for_user_per_day = 3\nmax_gpu_hours_lost_for_user_per_day = 10\n"
    )
    lim = load_policy(path).limits
    assert lim.max_gpu_hours_lost_per_user_per_day == 4.5
    assert lim.max_requeues_for_user_per_day == 3
    assert lim.max_gpu_hours_lost_for_user_per_day == 10.0
    assert lim.max_preemptions_per_user_per_day == 8  # absent: the default
    yaml = tmp_path / "p.yaml"
    yaml.write_text(
        "version: 1\nlimits:\n  max_requeues_for_user_per_day: null\n"
        "  max_gpu_hours_lost_for_user_per_day: null\n"
    )
    lim = load_policy(yaml).limits
    assert lim.max_requeues_for_user_per_day is None
    assert lim.max_gpu_hours_lost_for_user_per_day is None
    # TOML has no null: "unlimited" says the same
    path.write_text(
        'version = 1\n[limits]\nmax_preemptions_per_user_per_day = "unlimited"\n'
        'max_gpu_hours_lost_per_user_per_day = "unlimited"\n'
    )
    lim = load_policy(path).limits
    assert lim.max_preemptions_per_user_per_day is None
    assert lim.max_gpu_hours_lost_per_user_per_day is None
    assert lim.max_requeues_for_user_per_day == 16


def test_per_user_limits_errors_name_each_key() -> None:
    with pytest.raises(InputError) as e:
        parse_policy(
            {
                "version": 1,
                "limits": {
                    "max_gpu_hours_lost_per_user_per_day": -1,
                    "max_requeues_for_user_per_day": -2,
                    "max_gpu_hours_lost_for_user_per_day": "lots",
                    "max_victims_per_plan": "Unlimited",
                    "max_requeues_per_user_per_day": 3,
                },
            },
            "p.toml",
        )
    msg = str(e.value)
    for part in (
        "limits.max_gpu_hours_lost_per_user_per_day: must be >= 0",
        "limits.max_requeues_for_user_per_day: must be >= 0",
        "limits.max_gpu_hours_lost_for_user_per_day:",
        "limits.max_victims_per_plan:",
        "limits.max_requeues_per_user_per_day: unknown key",
    ):
        assert part in msg


def test_all_errors_at_once_with_keys() -> None:
    with pytest.raises(InputError) as e:
        parse_policy(
            {
                "version": 1,
                "limits": {"max_victims_per_plan": -1},
                "protections": {"extra": ["no-checkpoint", "foo"], "disable": ["qos", "qos"]},
                "strategies": [
                    {"name": "free-nvlink-block", "args": {"max_targets": 0}},
                    {"name": "nope"},
                ],
                "typo": 1,
            },
            "policy.toml",
        )
    msg = str(e.value)
    assert msg.startswith("policy.toml: ")
    for part in (
        "limits.max_victims_per_plan: must be >= 0",
        "protections.extra[1]: unknown protection 'foo', must be one of "
        "large-job, multi-node, no-checkpoint",
        "protections.disable: 'qos' listed twice",
        "strategies[0].args.max_targets: must be >= 1",
        "strategies[1].name: unknown strategy 'nope', must be one of free-nvlink-block",
        "typo: unknown key",
    ):
        assert part in msg


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({}, "version: required"),
        ({"version": 2}, "version: this slurm-defrag reads version = 1, found 2"),
        (
            {"version": 1, "protections": {"disable": ["multi-node"]}},
            "protections.disable[0]: 'multi-node' is an extra protection",
        ),
        (
            {"version": 1, "protections": {"extra": ["qos"]}},
            "protections.extra[0]: 'qos' is a default protection",
        ),
        ({"version": 1, "solver": {"num_workers": 0}}, "solver.num_workers: must be >= 1"),
        ({"version": 1, "drain": {"max_wait_hours": -1}}, "drain.max_wait_hours: must be >= 0"),
    ],
)
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


# -- hostile input (issue 15) -----------------------------------------------------------

BOMB = (
    "x-a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    + "".join(
        f"x-{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n"
        for a, b in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "version: *i\n"  # the wrong-version message printed repr(): all 9^9 items
)


def test_yaml_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    """Defect: a billion-laughs YAML policy hung: safe_load shares the aliased lists, but
    the ``version`` error message took their repr() (9^9 items). Now refused at the first
    alias, before anything is built."""
    import time

    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    started = time.monotonic()
    with pytest.raises(InputError, match=r"bomb.yaml: not valid YAML at line 2: aliases"):
        load_policy(path)
    assert time.monotonic() - started < 1.0


def test_yaml_merge_keys_are_aliases_too(tmp_path: Path) -> None:
    path = tmp_path / "merge.yaml"
    path.write_text("version: 1\nbase: &b {min_runtime_minutes: 0}\nprotections:\n  <<: *b\n")
    with pytest.raises(InputError, match="aliases"):
        load_policy(path)


def test_plain_yaml_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("version: 1\nlimits:\n  max_victims_per_plan: 3\n")
    assert load_policy(path).limits.max_victims_per_plan == 3


@pytest.mark.parametrize(
    ("name", "content", "words"),
    [
        ("p.toml", b"version = 1\n# \xff\n", ("not UTF-8",)),
        ("p.yaml", b"version: 1\nx: \xff\n", ("not UTF-8",)),
        ("p.toml", b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n", ("nested too deeply",)),
        ("p.yaml", b"version: 1\nx: " + b"[" * 5000 + b"]" * 5000 + b"\n", ("nested deeper",)),
        ("p.yaml", b"version: 1\nlimits: {a: [\n", ("not valid YAML at line",)),
        ("p.toml", b'version = 1\n[limits]\n"a\\nb" = 1\n', ("limits.a\\nb: unknown key",)),
        ("p.toml", b"version = 1\n[solver]\nnum_workers = 100000000\n", ("solver.num_workers",)),
        (
            "p.toml",
            b"version = 1\n[solver]\nmax_time_in_seconds = inf\n",
            ("solver.max_time_in_seconds",),
        ),
        (
            "p.toml",
            b"version = 1\n[solver]\nrandom_seed = 99999999999999\n",
            ("solver.random_seed",),
        ),
        ("p.toml", b'version = 1\n[solver]\nsubsolvers = ["bogus"]\n', ("solver.subsolvers",)),
        ("p.toml", b"version = 1\nlimits = 3\n", ("limits:",)),
        ("p.toml", b"version = 1\n[[strategies]]\nname = 3\n", ("strategies[0].name",)),
    ],
)
def test_hostile_policy_is_one_line_through_the_cli(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    content: bytes,
    words: tuple[str, ...],
) -> None:
    """Defect: non-UTF-8 files, 5,000-deep TOML/YAML (RecursionError), multi-line YAML
    errors and out-of-range solver settings (CP-SAT's RuntimeError/TypeError mid-plan)
    were tracebacks or several lines; now one line, exit != 0."""
    from cli_run import assert_one_line_error

    path = tmp_path / name
    path.write_bytes(content)
    assert_one_line_error(
        capsys,
        "plan",
        "-s",
        str(ROOT / "examples" / "course.json"),
        "-p",
        str(path),
        words=(str(path), *words),
    )


@pytest.mark.parametrize(
    "table",
    ["protections", "limits", "cost", "drain", "solver"],
)
def test_unknown_keys_in_every_policy_table(table: str) -> None:
    with pytest.raises(InputError, match=rf"{table}\.nope: unknown key"):
        parse_policy({"version": 1, table: {"nope": 1}})
    with pytest.raises(InputError, match=r"strategies\[0\]\.args\.nope"):
        parse_policy(
            {"version": 1, "strategies": [{"name": "free-nvlink-block", "args": {"nope": 1}}]}
        )


def test_wrong_version_message_is_bounded() -> None:
    """The same hang without YAML: a huge ``version`` value is not echoed whole."""
    big = [["lol"] * 1000] * 1000
    with pytest.raises(InputError) as err:
        parse_policy({"version": big})
    assert len(str(err.value)) < 300
    with pytest.raises(InputError, match="found 2"):
        parse_policy({"version": 2})


@pytest.mark.parametrize("name", ["p.toml", "p.yaml"])
def test_integer_beyond_pythons_digit_limit(tmp_path: Path, name: str) -> None:
    """Defect (found by the fuzz tests): a 5,000-digit number was a ValueError traceback."""
    path = tmp_path / name
    sep = " = " if name.endswith("toml") else ": "
    path.write_text("version" + sep + "9" * 5000 + "\n")
    with pytest.raises(InputError, match="an integer with too many digits"):
        load_policy(path)


def test_strategy_name_of_the_wrong_type() -> None:
    """Defect (found by the fuzz tests): ``name = [..]`` raised TypeError (unhashable list)."""
    with pytest.raises(InputError, match=r"strategies\[0\]\.name"):
        parse_policy({"version": 1, "strategies": [{"name": ["x"]}]})


def test_deep_yaml_is_refused_quickly(tmp_path: Path) -> None:
    """Defect (found by the fuzz tests): 3,000 unclosed brackets took seconds (under tracing)
    to reach the recursion limit; the composer now stops at 64 levels."""
    import time

    path = tmp_path / "deep.yaml"
    path.write_text("version: 1\nlimits: " + "[" * 3000)
    started = time.monotonic()
    with pytest.raises(InputError, match="nested deeper than 64 levels"):
        load_policy(path)
    assert time.monotonic() - started < 2.0  # generous: CI machines are shared
