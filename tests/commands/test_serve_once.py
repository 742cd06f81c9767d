"""``slurm-defrag serve --once`` exits with what the cycle met (issue #45)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from slurm_defrag.errors import ExitCode
from slurm_defrag.store import migrate
from slurm_defrag.store.engine import make_engine


def test_once_without_slurm_is_not_a_success(tmp_path: Path) -> None:
    """Was exit 0 with ``slurm-unavailable: ...`` on stdout: a quickstart "passed" on a
    host where ``scontrol`` is not installed."""
    url = f"sqlite:///{tmp_path / 'defrag.db'}"
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    cfg = tmp_path / "service.toml"
    cfg.write_text(
        f'db_url = "{url}"\nhttp_port = 0\nkill_switch_file = "{tmp_path / "STOP"}"\n'
        'log_level = "ERROR"\n',
        encoding="utf-8",
    )
    empty = tmp_path / "bin"
    empty.mkdir()  # a PATH without any Slurm command
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_DEFRAG_")}
    done = subprocess.run(
        [sys.executable, "-m", "slurm_defrag", "serve", "--once", "--config", str(cfg)],
        capture_output=True, text=True, timeout=120, env={**env, "PATH": str(empty)},
    )  # fmt: skip
    assert done.returncode == ExitCode.SLURM_UNAVAILABLE, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("slurm-defrag: error: Slurm unavailable:"), lines
    assert "scontrol" in lines[0]
    assert done.stdout == ""
