"""``slurm-defrag simulate --profile FILE``: a configuration is a profile, not a string."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_run import assert_one_line_error, run_main
from infra import ROOT

REC = ROOT / "tests" / "fixtures" / "sacct" / "rec-24.11"
SITE = ("-p", "b", "--workload", f"sacct:{REC / 'sacct.txt'}", "-s", str(REC / "snapshot.json"))
FAST = (*SITE, "--warmup-h", "0", "--seeds", "1")
PROFILES = ROOT / "examples" / "profiles"


def test_profiles_run_under_their_names_with_their_fields_in_the_results(
    capsys: pytest.CaptureFixture[str],
) -> None:
    one = PROFILES / "one-configuration.toml"
    code = run_main("simulate", *FAST, "--policies", "first-fit", "--profile", str(one), "--json")
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    assert result["settings"]["policies"] == ["first-fit", "one-configuration"]
    assert result["settings"]["defrag"] == ["none", "planner-gain"]
    fields = result["settings"]["profiles"]["one-configuration"]
    assert fields["defrag"] == {
        "step": "planner-gain",
        "max_lost_gpu_hours": 4.0,
        "max_hold_hours": 0.5,
        "queue_head": None,
    }
    assert fields["placement"]["lever"] == "shape-weights"
    assert {(r["policy"], r["defrag"]) for r in result["runs"]} == {
        ("first-fit", "none"),
        ("one-configuration", "planner-gain"),
    }


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--policies", "slurm+shape-weights~short-all"), ("unknown placement policy",)),
        (("--policies", "first-fit", "--defrag", "planner-gain@4/0.5"), ("--defrag: unknown",)),
    ],
)
def test_the_old_strings_are_refused(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], words: tuple[str, ...]
) -> None:
    assert_one_line_error(capsys, "simulate", *FAST, *args, words=words)


def test_a_bad_profile_is_one_line_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('version = 1\n[defrag]\nstep = "planner"\nmax_hold_hours = 1\n')
    assert_one_line_error(
        capsys, "simulate", *FAST, "--profile", str(bad), words=(str(bad), "defrag.max_hold_hours")
    )


def test_two_profiles_of_one_name_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    one = str(PROFILES / "one-configuration.toml")
    assert_one_line_error(
        capsys, "simulate", *FAST, "--profile", one, "--profile", one, words=("named alike",)
    )


def test_named_policies_run_under_every_defrag_step_beside_a_profile(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shape = str(PROFILES / "shape-weights.toml")
    code = run_main(
        "simulate", *FAST, "--policies", "first-fit", "--defrag", "none,planner-gain",
        "--profile", shape, "--json",
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    runs = [(r["policy"], r["defrag"]) for r in json.loads(out)["runs"]]
    assert runs == [
        ("first-fit", "none"),
        ("first-fit", "planner-gain"),
        ("shape-weights", "none"),
    ]
