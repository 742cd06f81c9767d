"""The web page in a real headless browser, without the cluster:
``slurm-defrag web --snapshot examples/course.json`` loaded in Debian's chromium.

Runs in the no-services phase; chromium missing skips it, or fails it under CI=true.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from headless_browser import CHROMIUM, WHAT, Dom, dump_dom, screenshot

from infra import EXAMPLES, require

CLI = str(Path(sys.executable).parent / "slurm-defrag")


@pytest.fixture
def course_page() -> Iterator[str]:
    """URL of ``slurm-defrag web`` serving the course snapshot on a free port."""
    require(CHROMIUM is not None, WHAT)
    proc = subprocess.Popen([CLI, "web", "--snapshot", str(EXAMPLES / "course.json"),
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    first: list[str] = []
    reader = threading.Thread(target=lambda: first.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout=60)
    try:
        assert first, f"no URL printed within 60 s (exit code {proc.poll()})"
        assert "http://" in first[0], first
        yield first[0].split(" on ", 1)[1].split()[0]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, proc.stderr.read()  # type: ignore[union-attr]


@pytest.mark.slow  # a headless Chromium
def test_course_snapshot_in_chromium(course_page: str, tmp_path: Path) -> None:
    dom = Dom.parse(dump_dom(course_page))
    assert dom.node_rows() == ["node01", "node02", "node03", "node04"]
    assert dom.gpus() == {(f"node0{n}", g) for n in range(1, 5) for g in range(8)}
    statuses = [e["status"] for e in dom.with_attr("status")]
    assert statuses.count("block") + statuses.count("stranded") == 9  # the 9 free GPUs
    starving = [e["job"] for e in dom.elements if e["tag"] == "tr" and "job" in e]
    assert starving == ["110"]
    shot = screenshot(course_page, tmp_path / "web-course.png")
    assert shot.read_bytes().startswith(b"\x89PNG")
