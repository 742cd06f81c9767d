"""The web page in a real headless browser, without the cluster:
``slurm-defrag web --snapshot examples/course.json`` loaded in Debian's chromium.

Runs in the no-services phase; chromium missing skips it, or fails it under CI=true.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from headless_browser import CHROMIUM, WHAT, Dom, dump_dom, screenshot

from infra import EXAMPLES, require

CLI = str(Path(sys.executable).parent / "slurm-defrag")


@pytest.fixture
def course_page() -> Iterator[str]:
    """URL of ``slurm-defrag web`` serving the course snapshot on a free port."""
    with serving(EXAMPLES / "course.json") as url:
        yield url


@contextlib.contextmanager
def serving(snapshot: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """URL of ``slurm-defrag web`` serving ``snapshot`` on a free port."""
    require(CHROMIUM is not None, WHAT)
    proc = subprocess.Popen([CLI, "web", "--snapshot", str(snapshot), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)  # fmt: skip
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


class _Styles(HTMLParser):
    """The background colour of each job's GPU cells."""

    def __init__(self) -> None:
        super().__init__()
        self.colours: dict[str, set[str]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "span" and "gpu" in (a.get("class") or "").split() and a.get("data-job"):
            self.colours.setdefault(a["data-job"] or "", set()).add(a.get("style") or "")


@pytest.mark.slow  # a headless Chromium
def test_jobs_on_one_node_differ_and_the_date_is_iso_with_zone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #45: 292 and 429, two ids the page's hash coloured exactly alike, on one
    node; the header's date was the browser locale's (US-style, no zone)."""
    from builders import node, running, snapshot
    from slurm_defrag.snapshot_file import save_snapshot

    snap = snapshot(
        [node("node01")], [running("292", {"node01": [0, 1]}), running("429", {"node01": [2]})]
    )
    path = tmp_path / "two.json"
    save_snapshot(snap, path)
    monkeypatch.setenv("TZ", "Asia/Kolkata")  # the browser's zone (chromium inherits it)
    with serving(path) as url:
        html = dump_dom(url)
    styles = _Styles()
    styles.feed(html)
    assert set(styles.colours) == {"292", "429"}, html[-3000:]
    assert all(len(c) == 1 for c in styles.colours.values())  # one colour per job
    assert styles.colours["292"] != styles.colours["429"]
    # the snapshot was taken at synth.EPOCH, shown in the reader's zone (+05:30)
    local = snap.taken_at.astimezone(ZoneInfo("Asia/Kolkata"))
    assert f" at {local:%Y-%m-%d %H:%M:%S}+05:30 " in re.sub(r"<[^>]+>", "", html), html[-3000:]
