"""Live: ``slurm-defrag top`` on the compose Slurm cluster, in a real terminal (tmux).

Read-only: it submits nothing, so it needs no exclusive turn on the cluster. A Slurm outage
is played on the client side, where ``top`` sees it: the cli backend's command prefix is a
wrapper that runs the Slurm commands in slurmctld, or, while a flag file exists, answers
the way a Slurm client does when slurmctld is down. The shared cluster itself stays up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from live_cluster import CTLD, DOCKER, GRES_CONF, cluster_is_up, ctld

from infra import require
from slurm_defrag.errors import ExitCode
from tmux_terminal import TmuxTerminal, require_tmux

pytestmark = pytest.mark.slurm

TOP = [sys.executable, "-m", "slurm_defrag.cli", "top"]
WRAPPER = """#!/bin/sh
if [ -e {flag} ]; then
    echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2
    exit 1
fi
exec {docker} exec {ctld} "$@"
"""


def live_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """Settings for the cli backend through the wrapper, and the outage flag file."""
    flag = tmp_path / "slurmctld-down"
    wrapper = tmp_path / "slurm-client"
    wrapper.write_text(WRAPPER.format(flag=flag, docker=DOCKER, ctld=CTLD))
    wrapper.chmod(0o755)
    env = {"SLURM_DEFRAG_SLURM_BACKEND": "cli",
           "SLURM_DEFRAG_SLURM_COMMAND_PREFIX": json.dumps([str(wrapper)]),
           "SLURM_DEFRAG_SLURM_GRES_CONF": str(GRES_CONF)}  # fmt: skip
    return env, flag


def test_top_live_survives_a_slurm_outage(tmp_path: Path) -> None:
    require(cluster_is_up(), f"compose Slurm cluster ({CTLD})")
    require_tmux()
    env, flag = live_env(tmp_path)
    nodes = [n for n in ctld("sinfo", "-h", "-N", "-o", "%N").split() if n]
    with TmuxTerminal([*TOP, "--interval", "1"], width=120, height=45, env=env) as term:
        screen = term.wait_for("source live (cli)", timeout_s=60)
        assert "GPU map" in screen
        assert all(n in screen for n in set(nodes)), screen
        flag.touch()  # slurmctld "goes down" between two refreshes
        screen = term.wait_for("refresh failed: Slurm unavailable", timeout_s=60)
        assert "GPU map" in screen  # the last good frame stays on screen
        flag.unlink()  # ... and comes back: the next refresh clears the status line
        term.wait_for("refresh failed", gone=True, timeout_s=60)
        term.send("C-c")
        assert term.wait_exit() == 0


def test_top_live_first_read_failing_is_one_line(tmp_path: Path) -> None:
    require(cluster_is_up(), f"compose Slurm cluster ({CTLD})")
    env, flag = live_env(tmp_path)
    flag.touch()
    out = subprocess.run([*TOP, "--once"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, **env, "COLUMNS": "300"})  # fmt: skip
    assert out.returncode == ExitCode.SLURM_UNAVAILABLE, out.stderr
    assert out.stderr.startswith("slurm-defrag: error: Slurm unavailable: ")
    assert out.stderr.count("\n") == 1
