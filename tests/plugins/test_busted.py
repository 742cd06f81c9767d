"""The Lua unit tests of job_submit.lua (slurm-plugins/tests/*_spec.lua), run by busted.

Debian builds Slurm 22.05 and 24.11 against Lua 5.1, so 5.1 is the interpreter that
matters; 5.4 guards the script for sites whose Slurm links a newer Lua. CI installs
``lua5.1 lua5.4 lua-busted`` (Debian package names); without them this test fails under
CI=true and is skipped elsewhere.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from .plugins_support import PLUGINS, require


@pytest.mark.parametrize("lua", ["lua5.1", "lua5.4"])
def test_busted_specs_pass(lua: str) -> None:
    busted = shutil.which("busted")
    require(busted is not None, "busted (Debian package lua-busted)")
    require(shutil.which(lua) is not None, f"{lua} (Debian package {lua})")
    assert busted is not None
    proc = subprocess.run(
        [busted, f"--lua={lua}", "--output=plainTerminal"],
        cwd=PLUGINS,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"busted failed under {lua}:\n{out}"
    m = re.search(r"(\d+) success(?:es)? / (\d+) failures? / (\d+) errors?", out)
    assert m is not None, f"no busted summary in:\n{out}"
    # guard against a run that silently found no spec files
    assert int(m[1]) >= 50, f"only {m[1]} busted tests ran:\n{out}"
    assert (int(m[2]), int(m[3])) == (0, 0), out
