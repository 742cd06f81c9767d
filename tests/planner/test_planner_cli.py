"""``slurm-defrag plan``: preview, JSON, and one clear line for a bad policy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slurm_defrag.cli", "plan", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_preview_shows_plan_and_maps() -> None:
    r = run("--snapshot", "examples/course.json", "--policy", "examples/policy.toml")
    assert r.returncode == 0, r.stderr
    assert "DRY RUN" in r.stdout
    assert "GPU map before" in r.stdout
    assert "GPU map after the plan" in r.stdout
    assert "requeue" in r.stdout


def test_json() -> None:
    r = run("--snapshot", "examples/course.json", "--json")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert [v["job_id"] for v in plan["victims"]] == ["104"]
    assert plan["solver"]["optimality"] == "proven"


def test_bad_policy_is_one_message(tmp_path: Path) -> None:
    bad = tmp_path / "policy.toml"
    bad.write_text(
        "version = 1\n[limits]\nmax_victims_per_plan = -1\n[protections]\nextra = ['foo']\n"
    )
    r = run("--snapshot", "examples/course.json", "--policy", str(bad))
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert "limits.max_victims_per_plan: must be >= 0" in r.stderr
    assert "protections.extra[0]: unknown protection 'foo'" in r.stderr


def test_unknown_target() -> None:
    r = run("--snapshot", "examples/course.json", "--target", "999")
    assert r.returncode != 0
    assert "999" in r.stderr
    assert "Traceback" not in r.stderr
