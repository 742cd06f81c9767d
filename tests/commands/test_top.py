"""``slurm-defrag top``: the frame (rich capture), ``--once``, errors, and a real terminal.

The course scenario (examples/course.json): job 110 (dave) asks for 3 NVLink-connected GPUs
on one node; 9 GPUs are free (5 unusable spatially, 4 by topology), none in a free block of
3, so it is falsely starved (spatial). node01 {6,7} and node03 {0,7} are free NVLink blocks.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from infra import EXAMPLES
from slurm_defrag.cli import app
from slurm_defrag.commands.top import next_frame
from slurm_defrag.commands.top_sources import FileSource, frame_reader
from slurm_defrag.errors import ExitCode
from slurm_defrag.report.top_view import TopFrame, plan_view, render_frame
from slurm_defrag.slurm.failures import SlurmUnavailableError
from slurm_defrag.store.plans import PlanRecord, StepRecord
from tmux_terminal import TmuxTerminal, require_tmux

COURSE = EXAMPLES / "course.json"
TOP = [sys.executable, "-m", "slurm_defrag.cli", "top"]


def course_frame(path: Path = COURSE) -> TopFrame:
    return frame_reader(FileSource(path), None)()


def capture(frame: TopFrame, *, width: int = 120, height: int | None = None,
            fit: bool = False) -> str:  # fmt: skip
    console = Console(record=True, width=width, height=height, force_terminal=True,
                      color_system="truecolor")  # fmt: skip
    console.print(render_frame(frame, console=console if fit else None))
    return console.export_text()


def row_of(text: str, first_cell: str) -> str:
    return next(line for line in text.splitlines() if line.split()[:1] == [first_cell])


def test_frame_shows_the_starving_job_every_node_and_free_blocks() -> None:
    text = capture(course_frame())
    assert "Falsely starved jobs" in text
    row = row_of(text, "110")
    for word in ("dave", "1x3 nvlink", "spatial", "needs 3 GPUs: 5 free on nodes it can use"):
        assert word in row
    assert "free GPUs 9/32" in text
    assert "unusable 9 (spatial 5, topology 4, configuration 0)" in text
    assert "FGD 9.0" in text
    assert f"source file {COURSE}" in " ".join(text.split())  # the header may wrap
    # Every node, with its GPU slots: □ = free and in the node's largest free NVLink block.
    assert "██████□□" in row_of(text, "node01")
    assert "█·██████" in row_of(text, "node02")
    assert "□██████□" in row_of(text, "node03")
    assert "█··█|██□□" in row_of(text, "node04")
    assert "free, in largest free NVLink block" in text
    assert "give --db URL" in text  # no database: plans unknown, not "none"


def test_small_terminal_still_renders() -> None:
    frame = frame_reader(FileSource(EXAMPLES / "mixed-64.json"), None)()
    for width, height in ((20, 4), (40, 8), (100, 20)):
        text = capture(frame, width=width, height=height, fit=True)
        assert text.strip()
    # 100 x 20: the map is cut down to the most fragmented nodes that fit.
    text = capture(frame, width=100, height=20, fit=True)
    assert "most fragmented of 64 nodes" in text
    assert len(text.splitlines()) <= 20


def test_refresh_failure_keeps_the_last_frame_and_says_why() -> None:
    frame = course_frame()

    def down() -> TopFrame:
        raise SlurmUnavailableError("Slurm unavailable: squeue --json: connection refused")

    failed = next_frame(down, frame, 5)
    assert failed.snapshot is frame.snapshot
    assert failed.status is not None
    assert "refresh failed: Slurm unavailable: squeue --json: connection refused" in failed.status
    assert "retrying every 5 s" in failed.status
    assert "refresh failed" in capture(failed)
    recovered = next_frame(course_frame, failed, 5)
    assert recovered.status is None


def _plan(closed_at: datetime | None) -> PlanRecord:
    t0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    return PlanRecord(
        id=7, cluster="course", snapshot_id=1, created_at=t0, mode="enforce",
        status="done" if closed_at else "applying", inputs={}, solver_status=None,
        objective=None, bound=None, solve_time_s=None, holder=None, closed_at=closed_at,
        note="",
    )  # fmt: skip


def _step(seq: int, state: str, started: int | None, finished: int | None) -> StepRecord:
    t0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    at = {k: t0 + timedelta(minutes=v) for k, v in (("s", started), ("f", finished))
          if v is not None}  # fmt: skip
    return StepRecord(id=seq, plan_id=7, seq=seq, action="requeue", target=str(100 + seq),
                      args={}, state=state, error="", started_at=at.get("s"),
                      finished_at=at.get("f"))  # fmt: skip


def test_plan_replayed_to_a_moment() -> None:
    """Steps as they stood at ``at``: finished, running, or not yet begun."""
    t0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    steps = [_step(0, "done", 1, 2), _step(1, "done", 3, 9), _step(2, "failed", 10, 11)]
    rec = _plan(closed_at=t0 + timedelta(minutes=12))
    now = plan_view(rec, steps)
    assert (now.status, [s.state for s in now.steps]) == ("done", ["done", "done", "failed"])
    then = plan_view(rec, steps, t0 + timedelta(minutes=5))
    assert (then.status, [s.state for s in then.steps]) == (
        "applying",
        ["done", "running", "pending"],
    )
    before = plan_view(rec, steps, t0)
    assert (before.status, [s.state for s in before.steps]) == ("open", ["pending"] * 3)


def test_once_through_the_cli() -> None:
    result = CliRunner().invoke(app, ["top", "--snapshot", str(COURSE), "--once"],
                                env={"COLUMNS": "160", "NO_COLOR": "1"})  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "spatial" in row_of(result.output, "110")
    assert all(f"node0{i}" in result.output for i in range(1, 5))


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (
            ["--snapshot", "/nonexistent/course.json"],
            "/nonexistent/course.json: no such file",
            ExitCode.BAD_INPUT,
        ),
        (
            ["--snapshot", str(COURSE), "--at", "2026-11-29T12:00"],
            "--at replays stored",
            ExitCode.BAD_INPUT,
        ),
        (
            ["--db", "sqlite:////nonexistent/dir/x.db"],
            "directory /nonexistent/dir does not",
            ExitCode.DB_UNREACHABLE,
        ),
        (
            ["--db", "postgresql+psycopg://u@127.0.0.1:1/db"],
            "cannot reach database",
            ExitCode.DB_UNREACHABLE,
        ),
    ],
)
def test_bad_input_is_one_line_and_nonzero(args: list[str], message: str, code: int) -> None:
    out = subprocess.run([*TOP, *args, "--once"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "COLUMNS": "300"})  # fmt: skip
    assert out.returncode == code, out.stderr
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("slurm-defrag: error: ")
    assert message in out.stderr


def test_broken_snapshot_file_is_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"nodes": [')
    out = subprocess.run([*TOP, "-s", str(broken), "--once"], capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert out.returncode == ExitCode.BAD_INPUT
    assert (
        out.stderr.strip() == f"slurm-defrag: error: {broken}: not valid JSON at line 1 "
        "column 12: Expecting value"
    )


@pytest.mark.slow  # a real terminal (tmux) and a subprocess per frame
def test_real_terminal_under_tmux(tmp_path: Path) -> None:
    """In tmux: the starving job on screen, a refresh failure shown and recovered, Ctrl-C = 0."""
    require_tmux()
    snap = tmp_path / "course.json"
    snap.write_bytes(COURSE.read_bytes())
    with TmuxTerminal([*TOP, "--snapshot", str(snap), "--interval", "1"],
                      width=110, height=30) as term:  # fmt: skip
        screen = term.wait_for("Falsely starved jobs")
        assert "spatial" in row_of(screen, "110")
        assert all(f"node0{i}" in screen for i in range(1, 5))
        assert "Ctrl-C quits" in screen
        # A half-written file at the next refresh: the frame stays, a status line says why.
        snap.write_text("{")
        screen = term.wait_for("refresh failed")
        assert "spatial" in row_of(screen, "110")
        snap.write_bytes(COURSE.read_bytes())
        term.wait_for("refresh failed", gone=True)
        term.send("C-c")
        assert term.wait_exit() == 0


def test_fitted_frame_caps_a_long_starved_list() -> None:
    from slurm_defrag.metrics.compute import compute
    from slurm_defrag.synth import random_cluster

    snap = random_cluster(64, seed=0, fill=0.8, pending=60)
    report = compute(snap)
    assert len(report.falsely_starved) == 19
    frame = TopFrame(snapshot=snap, report=report, source="synthetic",
                     refreshed_at=datetime.now(UTC))  # fmt: skip
    fitted = capture(frame, width=120, height=30, fit=True)
    assert "... and 9 more (slurm-defrag frag lists them all)" in fitted
    assert len(fitted.splitlines()) <= 30
    full = capture(frame, width=120)
    assert all(p.job_id in full for p in report.falsely_starved)


def test_refreshes_share_one_metrics_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each refresh recomputes only the node classes that changed, as the service does."""
    from slurm_defrag.metrics import compute as compute_module

    caches: list[object] = []
    real = compute_module.compute

    def spy(snapshot: object, **kwargs: object) -> object:
        caches.append(kwargs.get("cache"))
        return real(snapshot, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(compute_module, "compute", spy)
    read = frame_reader(FileSource(COURSE), None)
    first, second = read(), read()
    assert first.report == second.report
    assert len(caches) == 2
    assert caches[0] is not None
    assert caches[0] is caches[1]
