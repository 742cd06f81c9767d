"""scripts/manpage.py writes slurm-defrag(1) from the commands' own help (issue #45)."""

from __future__ import annotations

import shutil
import subprocess
import sys

from infra import ROOT
from slurm_defrag.cli import COMMANDS


def test_the_man_page_has_every_command_and_renders() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "manpage.py")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = done.stdout
    assert page.startswith(".TH SLURM\\-DEFRAG 1 ")
    for name in COMMANDS:
        assert f'.SS "slurm\\-defrag {name.replace("-", chr(92) + "-")}"' in page, name
    assert '.SS "slurm\\-defrag db upgrade"' in page
    assert "\\-\\-show\\-completion SHELL" in page
    assert ".SH EXIT STATUS" in page
    groff = shutil.which("groff")
    if groff is not None:  # what man(1) runs: no warning, and the examples kept as lines
        out = subprocess.run([groff, "-man", "-Tutf8", "-ww"], input=page,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        assert out.returncode == 0
        assert out.stderr == ""
        assert "slurm-defrag frag --snapshot examples/course.json" in out.stdout.replace("‐", "-")
