"""Debian's ``chromium`` in headless mode, for tests of the web page.

The page draws itself with JavaScript, so a test loads it in a real browser, lets it run
(``--virtual-time-budget``: the page's timers and fetches run, then the DOM is dumped) and
reads the resulting DOM. Each call uses a throwaway profile so parallel runs never share
one.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WHAT = "chromium (Debian package chromium, installed by scripts/test.sh)"


def _run(url: str, *flags: str, budget_ms: int, timeout_s: float) -> str:
    assert CHROMIUM is not None, WHAT
    with tempfile.TemporaryDirectory(prefix="defrag-chromium-") as profile:
        proc = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--hide-scrollbars", f"--user-data-dir={profile}",
             f"--virtual-time-budget={budget_ms}", *flags, url],
            capture_output=True, text=True, timeout=timeout_s, check=False,
        )  # fmt: skip
    if proc.returncode != 0:
        raise AssertionError(f"chromium failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.stdout


def dump_dom(url: str, budget_ms: int = 8000, timeout_s: float = 90) -> str:
    """The page's DOM after its scripts ran for ``budget_ms`` of virtual time."""
    return _run(url, "--dump-dom", budget_ms=budget_ms, timeout_s=timeout_s)


def screenshot(
    url: str, path: Path, size: str = "1400,1000", budget_ms: int = 8000, timeout_s: float = 90
) -> Path:
    _run(
        url,
        f"--screenshot={path}",
        f"--window-size={size}",
        budget_ms=budget_ms,
        timeout_s=timeout_s,
    )
    assert path.stat().st_size > 0, f"chromium wrote no screenshot to {path}"
    return path


class Dom(HTMLParser):
    """The ``data-*`` attributes of every element, as the page's tests read them."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[dict[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        data = {k.removeprefix("data-"): v or "" for k, v in attrs if k.startswith("data-")}
        if data:
            self.elements.append({"tag": tag, **data})

    @classmethod
    def parse(cls, html: str) -> Dom:
        dom = cls()
        dom.feed(html)
        return dom

    def gpus(self) -> set[tuple[str, int]]:
        """(node, GPU index) of every GPU cell of the map."""
        return {(e["node"], int(e["gpu"])) for e in self.elements if "gpu" in e}

    def node_rows(self) -> list[str]:
        return [e["node"] for e in self.elements if e["tag"] == "tr" and "node" in e]

    def with_attr(self, name: str) -> list[dict[str, str]]:
        return [e for e in self.elements if name in e]
