"""A real terminal for tests of full-screen commands: a detached tmux session.

Each instance runs its own tmux server on a socket in its own temporary directory (``-S``),
so tests never see or disturb anyone's sessions; :meth:`TmuxTerminal.close` kills only that
server and removes the directory.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from infra import require


def require_tmux() -> None:
    require(shutil.which("tmux") is not None, "tmux (Debian package tmux)")


class TmuxTerminal:
    """``argv`` running in a ``width`` x ``height`` terminal; its exit code is kept."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        width: int = 100,
        height: int = 30,
        env: dict[str, str] | None = None,
    ) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="tmux-term-"))
        self.socket = str(self._dir / "socket")
        self._rc = self._dir / "rc"
        exports = [f"{k}={v}" for k, v in (env or {}).items()]
        # The shell runs the command and then records its status: the session ends with it.
        rc = shlex.quote(str(self._rc))
        line = f"env {shlex.join(exports)} {shlex.join(argv)}; echo $? > {rc}"
        self._tmux("new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height), line)

    def _tmux(self, *args: str) -> str:
        out = subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True,
                             text=True, timeout=30, check=True)  # fmt: skip
        return out.stdout

    def screen(self) -> str:
        """What the terminal shows now, one line per row."""
        return self._tmux("capture-pane", "-p", "-t", "t")

    def wait_for(self, text: str, timeout_s: float = 30.0, *, gone: bool = False) -> str:
        """Wait until ``text`` is on screen (or, with ``gone``, no longer); returns the screen."""
        deadline = time.monotonic() + timeout_s
        shown = ""
        while time.monotonic() < deadline:
            if self.exit_code() is not None:
                raise AssertionError(f"exited ({self.exit_code()}) while waiting for {text!r}")
            shown = self.screen()
            if (text in shown) != gone:
                return shown
            time.sleep(0.2)
        raise AssertionError(f"{text!r} {'still' if gone else 'not'} on screen:\n{shown}")

    def send(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "t", *keys)

    def exit_code(self) -> int | None:
        text = self._rc.read_text().strip() if self._rc.exists() else ""
        return int(text) if text else None

    def wait_exit(self, timeout_s: float = 15.0) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if (rc := self.exit_code()) is not None:
                return rc
            time.sleep(0.1)
        raise AssertionError(f"still running after {timeout_s:g} s:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True,
                       timeout=30, check=False)  # fmt: skip
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> TmuxTerminal:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
