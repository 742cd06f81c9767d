"""A hung Slurm client cannot hang the service: ``command_timeout_s`` bounds every command.

Real processes (the default :func:`subprocess_runner`), not a fake raising TimeoutExpired:
a frozen slurmctld makes ``squeue`` wait, and the command prefix (``docker exec``, ``sudo``,
a wrapper script) may leave a grandchild holding stdout open after the direct child is
killed. The live counterpart is ``tests/e2e/test_service_faults_live.py`` (slurmctld
stopped with ``kill -STOP``).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from slurm_defrag.slurm.cli_backend import CliSlurm
from slurm_defrag.slurm.connection import SlurmSettings
from slurm_defrag.slurm.failures import SlurmUnavailableError


def test_a_hung_command_gives_up_after_its_timeout(tmp_path: Path) -> None:
    hung = tmp_path / "hung-slurm.sh"
    # The grandchild keeps the pipes open for 30 s; the child itself never answers.
    hung.write_text("#!/bin/sh\nsleep 30 &\nexec sleep 30\n")
    hung.chmod(0o755)
    slurm = CliSlurm(SlurmSettings(command_prefix=[str(hung)], command_timeout_s=0.5))
    started = time.monotonic()
    with pytest.raises(SlurmUnavailableError, match=r"no answer within 0\.5 s"):
        slurm.snapshot()
    assert time.monotonic() - started < 5
