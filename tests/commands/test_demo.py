"""``slurm-defrag demo`` end to end: the service in enforce on the simulated cluster.

Seed 0, large-jobs profile (the defaults): at the first cycle job 122 (4 H100 GPUs,
NVLink) waits while node05 and node06 have 2 free GPUs each; the plan requeues the two
young 1-GPU jobs 113 and 114 of node05, holds node05 for it, and at the next cycle 122
runs there. Ten simulated minutes at 600x take one wall second of pacing: the run is as
long as its ten cycles take to compute, and the same every time (lockstep, seeded).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from cli_run import assert_one_line_error, run_main
from slurm_defrag.store.database import Store
from slurm_defrag.store.plans import Plans
from slurm_defrag.store.repo import Repository


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path]:
    db = tmp_path_factory.mktemp("demo") / "demo.db"
    capture: list[str] = []
    code = _in_process(capture, "demo", "--duration", "1s", "--speed", "600", "--port", "0",
                       "--db", str(db), "--seed", "0")  # fmt: skip
    return code, capture[0], db


def _in_process(out: list[str], *args: str) -> int:
    """``run_main`` with stdout captured (module fixtures cannot use capsys)."""
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = run_main(*args)
    out.append(buf.getvalue())
    return code


def test_the_first_cycle_plans_and_the_second_has_applied_it(
    demo_run: tuple[int, str, Path],
) -> None:
    code, out, _ = demo_run
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].startswith("slurm-defrag demo: 8 simulated nodes (56 GPUs), profile large")
    assert lines[1].startswith("  web page  http://127.0.0.1:")
    assert "simulated 00:00]  plan #1 admitted: job 122 (1x4 nvlink h100) on node05 GPUs " in out
    assert "requeueing 113, 114" in out
    assert "simulated 00:01]  plan #1 done: served job 122 on node05" in out


def test_the_summary(demo_run: tuple[int, str, Path]) -> None:
    _, out, _ = demo_run
    summary = out[out.index("summary:") :]
    assert "00:10 simulated" in summary
    assert "10 service cycles, 10 snapshots stored" in summary
    assert "first plan applied  " in summary
    assert "(simulated 00:01)" in summary
    assert "jobs helped         " in summary
    assert "122 (4 GPUs)" in summary
    assert "requeues            " in summary
    assert "GPU-hours of work lost" in summary
    assert "fragmentation       free GPUs unusable 17 of 17 -> " in summary
    assert "jobs falsely starved 2 -> " in summary
    assert "left behind         nothing" in summary


def test_history_plans_and_commands_are_in_the_database(demo_run: tuple[int, str, Path]) -> None:
    _, _, db = demo_run
    with Store.open(f"sqlite:///{db}") as store:
        with store.engine.connect() as conn:
            snapshots = conn.execute(text("SELECT count(*) FROM snapshots")).scalar_one()
            commands = [r[0] for r in conn.execute(text("SELECT argv FROM slurm_commands"))]
            metrics = conn.execute(text("SELECT count(*) FROM group_metrics")).scalar_one()
        assert snapshots == 10
        assert metrics >= snapshots  # the history views: cluster, partition, model per snapshot
        plans = Plans(store.engine)
        done = [p for p in plans.recent(limit=100) if "plan" in p.inputs and p.status == "done"]
        assert done
        first = min(done, key=lambda p: p.id)
        steps = plans.steps(first.id)
        assert [(s.action, s.target, s.state) for s in steps if s.action == "requeue"] == [
            ("requeue", "113", "done"),
            ("requeue", "114", "done"),
        ]
        assert not plans.recent(open_only=True, limit=100)  # packing's record closed too
        repo = Repository(store)
        last = repo.latest()
        assert last is not None
        # the target ran on the block the plan freed: in the snapshot after the plan
        target = first.inputs["plan"]["targets"][0]
        node = target["placements"][0]["node"]
        after = repo.load_snapshot(first.snapshot_id + 1)  # type: ignore[operator]
        assert node in after.job_by_id[target["job_id"]].gpus
        # no reservation or drain at the end (packing's weights are put back after the last
        # snapshot, at shutdown: "left behind nothing" is read from the cluster itself)
        assert last.reservations == ()
        assert not any(n.drained for n in last.nodes)
        packing = [p for p in plans.recent(limit=100) if p.inputs.get("kind") == "packing"]
        assert [p.status for p in packing] == ["done"]
    argv = " ".join(json.dumps(c) for c in commands)
    assert "requeue" in argv
    assert f"ReservationName={first.inputs['reservation']}" in argv


def test_bad_options_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert_one_line_error(capsys, "demo", "--profile", "huge", words=("large-jobs, default",))
    assert_one_line_error(capsys, "demo", "--duration", "soon", words=("--duration",))


def _get(url: str) -> tuple[int, Any]:
    with urllib.request.urlopen(url, timeout=10) as r:
        body = r.read()
        kind = r.headers.get("Content-Type", "")
        return r.status, json.loads(body) if "json" in kind else body


def test_the_web_page_serves_during_the_run_and_sigterm_ends_it_with_the_summary(
    tmp_path: Path,
) -> None:
    """The real process: its page answers while cycles run; SIGTERM stops it early, the
    plans in flight finish, the summary is printed and the exit status is 0."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "slurm_defrag", "demo", "--duration", "10m", "--speed", "60",
         "--port", "0", "--db", str(tmp_path / "d.db")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: list[str] = []

    def read() -> None:  # line by line, while the test looks at what came so far
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        url = _wait(lambda: next((ln.split()[-1] for ln in lines if "web page" in ln), None), 60)
        status, page = _get(url)
        assert status == 200
        assert b"<script" in page
        plans = _wait(lambda: _get(url + "api/plans")[1]["plans"] or None, 60)
        assert any(p.get("targets") for p in plans)
        snap = _get(url + "api/snapshot")[1]
        assert snap["summary"]["nodes"] == 8
        history = _get(url + "api/history?since=1d")[1]
        assert history["series"]
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        reader.join(timeout=10)
    err = proc.stderr.read()  # type: ignore[union-attr]
    assert code == 0, err
    out = "".join(lines)
    assert "summary:" in out
    assert "left behind         nothing" in out


def _wait(probe: Any, timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            found = probe()
        except OSError:  # not listening yet
            found = None
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout_s} s")
