"""The example profiles are the configurations docs/benchmarks.md measured (issue #43).

Before profiles, a configuration was a string (``slurm+shape-weights~short-all~keep`` and
``planner-gain@4/0.5``) parsed into a :class:`SlurmMode` and a :class:`PlannerStep`. Each
example profile must build exactly the objects its old string did, so the documented
figures reproduce on the same seeds. The expected objects below are what the parser of
a64e75f returned, written out field by field.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_defrag.errors import InputError
from slurm_defrag.packing.fit_classes import Mix, TaskClass
from slurm_defrag.packing.node_levers import LeverSettings
from slurm_defrag.sim.configuration import from_profile, plain
from slurm_defrag.sim.defrag import NoDefrag
from slurm_defrag.sim.levers import CPU_BUCKETS, SlurmMode
from slurm_defrag.sim.placement.names import PLACEMENTS
from slurm_defrag.sim.placement.registry import POLICIES
from slurm_defrag.sim.planner_step import PlannerStep, make_step
from slurm_defrag.sim.profile import load_profile, parse_profile

PROFILES = Path(__file__).resolve().parents[2] / "examples" / "profiles"
PLACEHOLDER = Mix((TaskClass(1, 1, 1000, 1.0),))


def _shape(**queue: object) -> SlurmMode:
    return SlurmMode(LeverSettings("shape-weights"), **queue)  # type: ignore[arg-type]


def _fgd(lever: str, **mode: object) -> SlurmMode:
    return SlurmMode(LeverSettings(lever, mix=PLACEHOLDER), 30, **mode)  # type: ignore[arg-type]


_GAIN = {"min_gpus": 4, "harm": True, "drains": True, "drain_only": False, "gain": True}
EXPECTED: dict[str, tuple[str, SlurmMode | None, PlannerStep | None]] = {
    # profile: (old policy name, its SlurmMode, the PlannerStep its old --defrag built)
    "first-fit": ("first-fit", None, None),
    "one-configuration": (
        "slurm+shape-weights~short-all~keep",
        _shape(short_first="all", keep=0.5),
        PlannerStep(**_GAIN, keep_gpus=None, max_lost_gpu_hours=4.0, max_hold_hours=0.5),  # type: ignore[arg-type]
    ),
    "site-priorities": (
        "slurm+shape-weights~short-all~keep",
        _shape(short_first="all", keep=0.5),
        PlannerStep(  # type: ignore[arg-type]
            **_GAIN, keep_gpus=None, max_lost_gpu_hours=4.0, max_hold_hours=0.5, queue_head=1
        ),
    ),
    "keep-scarce": (
        "slurm+shape-weights~short-all~keep",
        _shape(short_first="all", keep=0.5),
        None,
    ),
    "short-first": ("slurm+shape-weights~short", _shape(short_first="scarce"), None),
    "short-first-all": ("slurm+shape-weights~short-all", _shape(short_first="all"), None),
    "shape-weights": ("slurm+shape-weights", _shape(), None),
    "shape-weights-gain12": (
        "slurm+shape-weights",
        _shape(),
        PlannerStep(**_GAIN, keep_gpus=None, max_lost_gpu_hours=12.0, max_hold_hours=None),  # type: ignore[arg-type]
    ),
    "size-weights": ("slurm+size-weights", SlurmMode(LeverSettings("size-weights")), None),
    "fgd-route-30": ("slurm+fgd-route/30", _fgd("fgd-route"), None),
    "fgd-route-score-30": ("slurm+fgd-route-score/30", _fgd("fgd-route-score"), None),
    "fgd-route-score-seen-30": (
        "slurm+fgd-route-score~seen/30",
        _fgd("fgd-route-score", seen_mix=True),
        None,
    ),
    "fgd-route-score-warm-30": (
        "slurm+fgd-route-score~warm/30",
        _fgd("fgd-route-score", seen_mix=True, warm=True),
        None,
    ),
    "fit-features-16c-30": (
        "slurm+fit-features@16:c/30",
        SlurmMode(LeverSettings("fit-features", cpu_buckets=CPU_BUCKETS, min_members=16), 30),
        None,
    ),
    "packing-planner": (
        "packing",
        None,
        PlannerStep(shared_victims=True, scope_nodes=32, solver_workers=1),
    ),
}


def test_every_example_profile_is_checked() -> None:
    assert sorted(p.stem for p in PROFILES.glob("*.toml")) == sorted(EXPECTED)


def _params(step: object) -> dict[str, object]:
    return {k: v for k, v in vars(step).items() if k != "name"}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_profile_builds_what_its_old_string_did(name: str) -> None:
    old_policy, mode, step = EXPECTED[name]
    config = from_profile(load_profile(PROFILES / f"{name}.toml"))
    assert config.placement.name == name
    assert config.placement.policy == old_policy.partition("+")[0]
    assert config.placement.mode == mode
    built = make_step(config.step, config.limits)
    if step is None:
        assert isinstance(built, NoDefrag)
    else:
        assert isinstance(built, PlannerStep)
        assert _params(built) == _params(step)  # the planner's policy (_policy) included


def test_the_placement_names_are_the_registry() -> None:
    assert set(PLACEMENTS) == set(POLICIES)
    assert plain("slurm").mode == SlurmMode(LeverSettings("none"))
    with pytest.raises(InputError, match=r"unknown placement policy 'slurm\+x'"):
        plain("slurm+x")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "version: required"),
        ({"version": 2}, "version: this slurm-defrag reads version = 1"),
        ({"version": 1, "colour": 1}, "colour: unknown key"),
        ({"version": 1, "placement": {"lever": "x"}}, "placement.lever: unknown 'x'"),
        (
            {"version": 1, "placement": {"policy": "fgd", "lever": "shape-weights"}},
            "placement.lever: levers act on Slurm's selection",
        ),
        (
            {"version": 1, "placement": {"lever": "shape-weights", "mix": "seen"}},
            "placement.mix: 'seen' needs an fgd-* lever",
        ),
        ({"version": 1, "placement": {"lever_every": 0}}, "placement.lever_every: Input should"),
        ({"version": 1, "job_submit": {"keep_scarce": 0.5}}, "job_submit.keep_scarce: needs"),
        ({"version": 1, "defrag": {"step": "planner-gain@4"}}, "defrag.step: unknown"),
        (
            {"version": 1, "defrag": {"step": "planner", "max_lost_gpu_hours": 4}},
            "defrag.max_lost_gpu_hours: step 'planner' takes no limits",
        ),
        ({"version": 1, "defrag": {"max_hold_hours": -1}}, "defrag.max_hold_hours: Input should"),
        (
            {"version": 1, "defrag": {"step": "planner", "queue_head": 1}},
            "defrag.queue_head: step 'planner' takes no limits",
        ),
        ({"version": 1, "defrag": {"queue_head": 0}}, "defrag.queue_head: Input should"),
    ],
)
def test_a_bad_profile_is_one_line_naming_the_field(data: dict[str, object], message: str) -> None:
    with pytest.raises(InputError) as info:
        parse_profile(data, "p.toml")
    text = str(info.value)
    assert text.startswith("p.toml: ")
    assert message in text
    assert "\n" not in text


def test_what_the_simulator_does_not_model_is_refused_naming_the_field() -> None:
    odd = parse_profile({"version": 1, "job_submit": {"short_first": 0.2}}, "odd.toml")
    with pytest.raises(InputError, match=r"odd: job_submit.short_first: the simulator models 0.1"):
        from_profile(odd)
    baseline = parse_profile(
        {"version": 1, "placement": {"policy": "fgd"}, "job_submit": {"short_first": 0.1}}
    )
    with pytest.raises(InputError, match='job_submit: a queue order needs policy = "slurm"'):
        from_profile(baseline)


def test_every_problem_is_in_the_one_line() -> None:
    bad = {"version": 1, "placement": {"lever": "x"}, "defrag": {"step": "y"}, "z": 1}
    with pytest.raises(InputError) as info:
        parse_profile(bad, "p.toml")
    text = str(info.value)
    for key in ("placement.lever: unknown 'x'", "defrag.step: unknown 'y'", "z: unknown key"):
        assert key in text


def test_queue_head_reaches_the_planner_step() -> None:
    """A profile's ``[defrag] queue_head`` is the step's (issue #41)."""
    profile = parse_profile(
        {"version": 1, "defrag": {"step": "planner-gain", "queue_head": 3}}, "p.toml"
    )
    config = from_profile(profile)
    step = make_step(config.step, config.limits)
    assert getattr(step, "queue_head", None) == 3
