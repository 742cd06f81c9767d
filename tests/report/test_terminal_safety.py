"""Issue #15, terminal output: Slurm/user strings can neither restyle nor drive the terminal.

A snapshot whose job names, users, QOS, node names, models, reasons and the cluster name
carry rich markup (``[/]``, ``[bold red]``) and terminal controls (CSI, OSC 52, BEL, CR,
C1, bidi overrides) goes through the real renderers and the CLI (frag, plan, top, snapshot
table, history): no traceback, no raw control byte reaches the output, the strings show
escaped; ``--json`` stays exact.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from slurm_defrag.cli import app
from slurm_defrag.commands.snapshot import summary_table
from slurm_defrag.metrics.compute import compute
from slurm_defrag.report.frag_view import render as render_frag
from slurm_defrag.report.safe_text import clean
from slurm_defrag.report.top_view import TopFrame, render_frame
from slurm_defrag.snapshot_file import load_snapshot

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

HOSTILE = "[/]x[bold red]y\x1b[2J\x1b]52;c;cHduZWQ=\x07\rz\x9b31m\u202egpj.exe\u2066\x00\x7f"
# Anything that would reach a terminal as a control: C0 but \n, DEL, C1, bidi controls.
RAW_CONTROL = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]"
)


def hostile_snapshot(tmp: Path) -> Path:
    data = json.loads((EXAMPLES / "course.json").read_text(encoding="utf-8"))
    data["cluster"] = "c" + HOSTILE
    for i, job in enumerate(data["jobs"]):
        job["name"] = f"j{i}" + HOSTILE
        job["user"] = "u" + HOSTILE
        job["comment"] = HOSTILE
        job["qos"] = "normal"
        if job["state"] == "PENDING":
            job["reason"] = "Resources" + HOSTILE
    for node in data["nodes"]:
        node["reason"] = "r" + HOSTILE
    path = tmp / "hostile.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _assert_safe(out: str) -> None:
    assert "Traceback" not in out
    bad = RAW_CONTROL.findall(out)
    assert not bad, f"raw controls reached the terminal: {bad!r}"
    assert "\\x1b[2J" in out or "\\x1b" in out  # shown, escaped


def _console() -> Console:
    # A real terminal as a user has it: colours on, so our own styles are escape codes;
    # strip those (they are ours) and look for anything left.
    return Console(record=True, width=250, force_terminal=True, color_system="standard")


def _text_of(console: Console) -> str:
    return console.export_text(styles=False)


def test_clean_escapes_every_control() -> None:
    assert clean("a\x1bb\x07\r\n\u202e\x9b") == "a\\x1bb\\x07\\x0d\\x0a\\u202e\\x9b"
    assert clean("plain [bold] é 中") == "plain [bold] é 中"
    assert not RAW_CONTROL.search(clean("".join(map(chr, range(0x2070)))))


def test_frag_and_top_renderers(tmp_path: Path) -> None:
    """Defects (#15): ``[/]`` in a name raised rich's MarkupError (a traceback) and
    ``[bold red]`` restyled the table; escape sequences in names reached the terminal."""
    snap = load_snapshot(hostile_snapshot(tmp_path))
    report = compute(snap)
    console = _console()
    render_frag(console, snap, report, 64)
    console.print(summary_table(snap))
    from datetime import UTC, datetime

    frame = TopFrame(
        snap,
        report,
        "file " + HOSTILE,
        datetime.now(UTC),
        plans=(),
        status="refresh failed: " + HOSTILE,
    )
    console.print(render_frame(frame))
    out = _text_of(console)
    _assert_safe(out)
    assert "[/]x[bold red]y" in out  # markup shown as text, not applied


@pytest.mark.parametrize("command", [["frag"], ["plan"], ["top", "--once"]])
def test_cli_tables(tmp_path: Path, command: list[str]) -> None:
    path = hostile_snapshot(tmp_path)
    result = CliRunner().invoke(app, [*command, "--snapshot", str(path)], env={"COLUMNS": "250"})
    assert result.exception is None, result.output
    assert result.exit_code == 0, result.output
    _assert_safe(result.stdout)


@pytest.mark.parametrize("command", [["frag"], ["plan"]])
def test_json_output_stays_exact(tmp_path: Path, command: list[str]) -> None:
    path = hostile_snapshot(tmp_path)
    result = CliRunner().invoke(app, [*command, "--snapshot", str(path), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["cluster"] == "c" + HOSTILE


def test_plan_render_escapes_victims_and_actions(tmp_path: Path) -> None:
    from slurm_defrag.commands.plan import render
    from slurm_defrag.domain.plan import apply_plan
    from slurm_defrag.planner.facade import make_plan
    from slurm_defrag.policy.file import default_policy

    snap = load_snapshot(hostile_snapshot(tmp_path))
    plan = make_plan(snap, default_policy())
    assert plan.victims  # the course scenario requeues someone: their user is in the table
    console = _console()
    render(console, snap, plan, apply_plan(snap, plan))
    out = _text_of(console)
    _assert_safe(out)
    assert "u[/]x[bold red]y" in out


def test_history_render(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from slurm_defrag.commands.history import render
    from slurm_defrag.store.frag_history import History, NodeRow, Point

    t = datetime(2026, 1, 1, tzinfo=UTC)
    point = Point(t, 1, 8, 4, 2, 100, 50, 1.5, 1, 1, 1)
    h = History(
        scope="partition",
        name="p" + HOSTILE,
        cluster="c" + HOSTILE,
        since=t,
        until=t,
        resolution_s=300,
        snapshots=1,
        series=[point],
        worst=[point],
        nodes=[NodeRow("n" + HOSTILE, ("p" + HOSTILE,), 1, 1, 1, 1, 1)],
    )
    console = _console()
    render(console, h)
    _assert_safe(_text_of(console))
