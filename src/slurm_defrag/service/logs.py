"""Log setup: one line per event on stderr (journald stores it), JSON optional."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime


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
    handler.setFormatter(JsonFormatter() if as_json else
                         logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # APScheduler logs every run at INFO; ours already says what each cycle did.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
