"""What the commands say when there is nothing to do or the port is taken (issue #45)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_run import assert_one_line_error, run_main
from infra import EXAMPLES
from slurm_defrag.errors import ExitCode
from slurm_defrag.store import migrate
from slurm_defrag.store.engine import make_engine


def test_plan_with_nothing_to_do_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was ``solver: NOT_SOLVED, optimality none, gap -, 0 candidate placements...``."""
    data = json.loads((EXAMPLES / "course.json").read_text(encoding="utf-8"))
    data["jobs"] = [j for j in data["jobs"] if j["state"] != "PENDING"]
    snap = tmp_path / "nothing-pending.json"
    snap.write_text(json.dumps(data), encoding="utf-8")
    capsys.readouterr()
    assert run_main("plan", "--snapshot", str(snap)) == 0
    out = capsys.readouterr().out
    assert "nothing to plan: no pending job is blocked by fragmentation" in out
    assert "NOT_SOLVED" not in out
    assert "solver:" not in out


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_web_port_in_use_names_the_options(
    taken_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was ``http_host/http_port: ...``: settings of the service, not what was typed."""
    line = assert_one_line_error(
        capsys, "web", "--snapshot", str(EXAMPLES / "course.json"), "--port", str(taken_port),
        words=("--host/--port", f"cannot listen on 127.0.0.1:{taken_port}"),
    )  # fmt: skip
    assert "http_" not in line


@pytest.mark.parametrize("where", ["config", "environment"])
def test_serve_port_in_use_names_where_the_port_was_set(
    where: str, taken_port: int, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'defrag.db'}"
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    cfg = tmp_path / "service.toml"
    text = f'db_url = "{url}"\nkill_switch_file = "{tmp_path / "STOP"}"\nlog_level = "ERROR"\n'
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_DEFRAG_")}
    if where == "config":
        text += f"http_port = {taken_port}\n"
    else:
        env["SLURM_DEFRAG_HTTP_PORT"] = str(taken_port)
    cfg.write_text(text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "slurm_defrag", "serve", "--config", str(cfg)],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == ExitCode.BAD_INPUT, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    named = f"http_port in {cfg}" if where == "config" else "SLURM_DEFRAG_HTTP_PORT"
    assert lines[0].startswith(f"slurm-defrag: error: {named}: cannot listen on "), lines[0]
