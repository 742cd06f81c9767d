"""Log lines: plain text for journald, or one JSON object per line."""

from __future__ import annotations

import json
import logging

from slurm_defrag.service.logs import JsonFormatter


def test_json_line_has_the_fields() -> None:
    record = logging.LogRecord("slurm_defrag.service.loop", logging.WARNING, __file__, 1,
                               "cycle: %s; no action this cycle", ("Slurm unavailable",), None)
    line = JsonFormatter().format(record)
    data = json.loads(line)
    assert data["level"] == "WARNING"
    assert data["logger"] == "slurm_defrag.service.loop"
    assert data["msg"] == "cycle: Slurm unavailable; no action this cycle"
    assert data["ts"].endswith("+00:00")
    assert "\n" not in line
