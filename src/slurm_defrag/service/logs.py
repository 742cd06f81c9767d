"""Log setup: one line per event on stderr (journald stores it), JSON optional.

Under systemd, stderr is a stream to journald; each line then starts with its syslog
priority (``<4>`` warning, ``<3>`` error: sd-daemon(3)'s prefix), so ``journalctl -p
warning`` shows the warnings and errors and nothing else. Elsewhere lines carry no prefix.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime
from typing import TextIO

# syslog priorities of Python's levels (sd-daemon(3): <0> emerg ... <7> debug)
_PRIORITY = {
    logging.CRITICAL: 2,
    logging.ERROR: 3,
    logging.WARNING: 4,
    logging.INFO: 6,
    logging.DEBUG: 7,
}


def syslog_priority(levelno: int) -> int:
    """The syslog priority of a Python log level (a custom level takes the next one below)."""
    return next((p for lvl, p in sorted(_PRIORITY.items(), reverse=True) if levelno >= lvl), 7)


class JournalPriorityFormatter(logging.Formatter):
    """Prefixes every line of ``inner``'s output with the record's ``<priority>``.

    Every line, not only the first: journald reads the prefix per line, so a traceback's
    lines would otherwise be stored at the default priority (info).
    """

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self._inner = inner

    def format(self, record: logging.LogRecord) -> str:
        prefix = f"<{syslog_priority(record.levelno)}>"
        return "\n".join(prefix + line for line in self._inner.format(record).split("\n"))


def stderr_is_journal(stream: TextIO, environ: dict[str, str] | None = None) -> bool:
    """True when ``stream`` is the journald stream systemd gave this service.

    systemd sets ``JOURNAL_STREAM=DEVICE:INODE`` of that stream; comparing it with the
    stream's own fstat keeps a child whose stderr was redirected elsewhere prefix-free.
    """
    value = (os.environ if environ is None else environ).get("JOURNAL_STREAM", "")
    dev, _, ino = value.partition(":")
    if not (dev.isascii() and dev.isdigit() and ino.isascii() and ino.isdigit()):
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (st.st_dev, st.st_ino) == (int(dev), int(ino))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, ``msg`` (+ ``exc``)."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out)


class SkippedRunFilter(logging.Filter):
    """Drops APScheduler's "skipped: maximum number of running instances reached".

    One cycle at a time is the design (``max_instances = 1``). When Slurm is slow — a hung
    slurmctld makes every command wait for its timeout — a cycle outlasts the interval and
    APScheduler would warn at every tick, burying the one line per cycle that names the
    cause (``cycle: Slurm unavailable: ...; no action this cycle``).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return "maximum number of running instances reached" not in record.getMessage()


def setup(level: str, as_json: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(SkippedRunFilter())
    # No timestamp in text mode: journald adds its own; JSON carries one for other sinks.
    formatter: logging.Formatter = (
        JsonFormatter() if as_json else logging.Formatter("%(levelname)s %(name)s: %(message)s")
    )
    if stderr_is_journal(sys.stderr):
        formatter = JournalPriorityFormatter(formatter)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # APScheduler logs every run at INFO; ours already says what each cycle did.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
