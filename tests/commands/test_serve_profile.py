"""``serve --profile``: the service runs the lever and the policy file a profile names."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_run import assert_one_line_error
from infra import ROOT
from slurm_defrag.commands.serve_profile import service_overrides
from slurm_defrag.errors import InputError
from slurm_defrag.service.settings import load

PROFILES = ROOT / "examples" / "profiles"


def test_the_one_configuration_sets_the_lever_and_the_policy() -> None:
    got = service_overrides(PROFILES / "one-configuration.toml")
    assert got["packing"] is True
    assert got["packing_lever"] == "shape-weights"
    assert Path(str(got["policy"])).resolve() == ROOT / "examples" / "policy-large-jobs.toml"
    settings = load(None, **got)
    assert (settings.packing, settings.packing_lever) == (True, "shape-weights")
    assert service_overrides(None) == {}


def test_what_the_service_cannot_run_is_refused_naming_the_field() -> None:
    with pytest.raises(InputError, match=r"first-fit.toml: placement.policy"):
        service_overrides(PROFILES / "first-fit.toml")
    with pytest.raises(InputError, match=r"placement.lever: .*'fit-features'"):
        service_overrides(PROFILES / "fit-features-16c-30.toml")


def test_a_bad_profile_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("version = 1\n[placement]\nlever = 'sideways'\n")
    assert_one_line_error(
        capsys, "serve", "--profile", str(bad), words=(str(bad), "placement.lever")
    )
