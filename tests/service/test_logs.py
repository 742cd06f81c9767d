"""Log lines: plain text for journald, or one JSON object per line."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from slurm_defrag.service.logs import JsonFormatter, setup


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


@pytest.fixture
def root_handlers() -> Iterator[None]:
    """setup() replaces the root logger's handlers: put pytest's back afterwards."""
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    try:
        yield
    finally:
        root.handlers[:] = saved
        root.setLevel(level)


def test_skipped_cycle_warnings_of_apscheduler_are_dropped(
    root_handlers: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # A hung slurmctld: the cycle waits for its command timeout, and APScheduler warns at
    # every tick it cannot start another one. Only the cycle's own line may remain.
    setup("INFO", as_json=False)
    logging.getLogger("apscheduler.scheduler").warning(
        'Execution of job "%s" skipped: maximum number of running instances reached (%d)',
        "Service._run_cycle", 1)
    logging.getLogger("apscheduler.scheduler").error("Job raised an exception")
    logging.getLogger("slurm_defrag.service.loop").warning(
        "cycle: Slurm unavailable: squeue --json: no answer within 4 s; no action this cycle")
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "ERROR apscheduler.scheduler: Job raised an exception",
        "WARNING slurm_defrag.service.loop: cycle: Slurm unavailable: squeue --json: "
        "no answer within 4 s; no action this cycle",
    ]
