"""``slurm-defrag demo``'s web page in a real headless browser, mid-run, without Slurm.

The demo runs as a user starts it (its own process, the default profile and speed); once
it has applied its first plan, Debian's chromium loads the page: every node and GPU of
the simulated cluster on the map, the plan with its steps. A screenshot goes to the
test's directory. Runs in the no-services phase; chromium missing skips it, or fails it
under CI=true.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from headless_browser import CHROMIUM, WHAT, Dom, dump_dom, screenshot

from infra import require


@pytest.mark.slow  # a headless Chromium
def test_the_demo_page_mid_run_in_chromium(tmp_path: Path) -> None:
    require(CHROMIUM is not None, WHAT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "slurm_defrag", "demo", "--duration", "10m", "--port", "0",
         "--db", str(tmp_path / "demo.db")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: list[str] = []

    def read() -> None:  # line by line, while the test looks at what came so far
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        deadline = time.monotonic() + 90
        while not any("plan #1 done" in ln for ln in lines):
            assert time.monotonic() < deadline, f"no plan applied within 90 s: {lines}"
            assert proc.poll() is None, proc.stderr.read()  # type: ignore[union-attr]
            time.sleep(0.2)
        url = next(ln.split()[-1] for ln in lines if "web page" in ln)
        dom = Dom.parse(dump_dom(url))
        assert dom.node_rows() == [f"node0{i}" for i in range(1, 9)]
        assert len(dom.gpus()) == 56
        plans = [e for e in dom.with_attr("plan") if e["tag"] == "details"]
        assert any(p["status"] == "done" for p in plans), plans
        shot = screenshot(url, tmp_path / "demo-page.png", size="1400,1400")
        assert shot.read_bytes().startswith(b"\x89PNG")
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        reader.join(timeout=10)
    assert code == 0, proc.stderr.read()  # type: ignore[union-attr]
    assert any(ln.startswith("summary:") for ln in lines)
