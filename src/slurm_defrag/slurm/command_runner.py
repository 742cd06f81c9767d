"""Running one Slurm command: argv lists only, a timeout, failures mapped to typed errors.

The runner is injected (tests pass a fake that replays recorded output); the default runs
the command with :func:`subprocess.run` and ``TZ=UTC`` so that times in scontrol text are
UTC (the text carries no zone, see :func:`slurm_defrag.slurm.parse.mapping.text_time`).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Sequence
from typing import Protocol

from slurm_defrag.slurm.failures import (
    SlurmCommandMissing,
    SlurmError,
    SlurmUnavailableError,
    from_failure,
)


class CommandResult(Protocol):
    """What a runner returns: the fields of :class:`subprocess.CompletedProcess`."""

    @property
    def returncode(self) -> int: ...

    @property
    def stdout(self) -> str: ...

    @property
    def stderr(self) -> str: ...


Runner = Callable[[Sequence[str], float], CommandResult]
"""``runner(argv, timeout_s)``; may raise FileNotFoundError / TimeoutExpired / OSError."""


def subprocess_runner(argv: Sequence[str], timeout_s: float) -> CommandResult:
    # Slurm prints what users typed (job names, comments, work directories) byte for byte,
    # and an admin's gres.conf may carry a Latin-1 comment: a strict decode would make one
    # such byte fail every read. A bad byte becomes U+FFFD instead: not a delimiter or an
    # escape in any format we parse (a backslash escape would break the JSON), and only
    # the field that held it changes.
    return subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        timeout=timeout_s,
        check=False,
        env={**os.environ, "TZ": "UTC"},
    )


# Exit statuses of a shell/exec wrapper (docker exec, sudo) that could not start the
# command at all: the Slurm client is missing where we run it.
_NOT_STARTED = frozenset({126, 127})


def run(runner: Runner, prefix: Sequence[str], args: Sequence[str], timeout_s: float) -> str:
    """Run ``prefix + args``; return stdout or raise the matching Slurm error."""
    return run_capture(runner, prefix, args, timeout_s)[0]


def run_capture(
    runner: Runner, prefix: Sequence[str], args: Sequence[str], timeout_s: float
) -> tuple[str, str]:
    """Like :func:`run`, but return (stdout, stderr) of a successful command."""
    argv = [*prefix, *args]
    what = " ".join(args)
    try:
        result = runner(argv, timeout_s)
    except FileNotFoundError:
        raise SlurmCommandMissing(what, argv[0], prefixed=bool(prefix)) from None
    except subprocess.TimeoutExpired:
        raise SlurmUnavailableError(
            f"Slurm unavailable: {what}: no answer within {timeout_s:g} s"
        ) from None
    except OSError as exc:
        raise SlurmUnavailableError(f"Slurm unavailable: {what}: {exc}") from None
    if result.returncode != 0:
        message = (result.stderr or "").strip() or (result.stdout or "").strip()
        if result.returncode in _NOT_STARTED:
            raise SlurmUnavailableError(
                f"Slurm unavailable: {what}: could not run it (exit {result.returncode}): "
                + " ".join(message.split())
            )
        raise from_failure(what, message or f"exit status {result.returncode}")
    return result.stdout or "", result.stderr or ""


_RELEASE = re.compile(r"\b(\d+\.\d+(?:\.\d+)?)\b")


def client_version(runner: Runner | None = None, timeout_s: float = 5.0) -> str | None:
    """The release of the Slurm client on PATH (``sinfo --version``: ``slurm 24.11.5``),
    None when there is none, it fails or prints no release (``--version`` must not fail
    on a host without Slurm)."""
    try:
        out = run(runner or subprocess_runner, (), ["sinfo", "--version"], timeout_s)
    except SlurmError:
        return None
    m = _RELEASE.search(out)
    return m[1] if m else None
