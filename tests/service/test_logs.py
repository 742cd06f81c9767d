"""Log lines: plain text for journald, or one JSON object per line."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_defrag.service.logs import (
    JournalPriorityFormatter,
    JsonFormatter,
    setup,
    stderr_is_journal,
    syslog_priority,
)


def test_json_line_has_the_fields() -> None:
    record = logging.LogRecord(
        "slurm_defrag.service.loop",
        logging.WARNING,
        __file__,
        1,
        "cycle: %s; no action this cycle",
        ("Slurm unavailable",),
        None,
    )
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
        "Service._run_cycle",
        1,
    )
    logging.getLogger("apscheduler.scheduler").error("Job raised an exception")
    logging.getLogger("slurm_defrag.service.loop").warning(
        "cycle: Slurm unavailable: squeue --json: no answer within 4 s; no action this cycle"
    )
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "ERROR apscheduler.scheduler: Job raised an exception",
        "WARNING slurm_defrag.service.loop: cycle: Slurm unavailable: squeue --json: "
        "no answer within 4 s; no action this cycle",
    ]


# -- journald priorities (sd-daemon(3) "<N>" line prefixes) ---------------------------


@pytest.mark.parametrize(
    ("level", "priority"),
    [
        (logging.CRITICAL, 2),
        (logging.ERROR, 3),
        (logging.WARNING, 4),
        (logging.INFO, 6),
        (logging.DEBUG, 7),
        (logging.WARNING + 5, 4),
        (1, 7),
    ],
)
def test_syslog_priority_of_each_level(level: int, priority: int) -> None:
    assert syslog_priority(level) == priority


def test_every_line_of_a_traceback_carries_the_priority() -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        import sys

        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "cycle failed", (),
                                   sys.exc_info())  # fmt: skip
    out = JournalPriorityFormatter(logging.Formatter("%(message)s")).format(record)
    lines = out.split("\n")
    assert len(lines) > 2
    assert all(line.startswith("<3>") for line in lines)
    assert lines[0] == "<3>cycle failed"


def _stream_id(path: Path) -> str:
    st = os.stat(path)
    return f"{st.st_dev}:{st.st_ino}"


def test_journal_stream_is_recognised_only_for_that_stream(tmp_path: Path) -> None:
    journal, other = tmp_path / "journal", tmp_path / "other"
    journal.touch()
    other.touch()
    with journal.open("w") as j, other.open("w") as o:
        env = {"JOURNAL_STREAM": _stream_id(journal)}
        assert stderr_is_journal(j, env)
        assert not stderr_is_journal(o, env)  # stderr redirected elsewhere: no prefix
        for bad in ("", "12", "x:y", "1²:3", ":"):
            assert not stderr_is_journal(j, {"JOURNAL_STREAM": bad})


def test_setup_prefixes_priorities_under_journald(
    root_handlers: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "journal"
    with path.open("w") as stream:
        monkeypatch.setattr("sys.stderr", stream)
        monkeypatch.setenv("JOURNAL_STREAM", _stream_id(path))
        setup("INFO", as_json=False)
        log = logging.getLogger("slurm_defrag.service.loop")
        log.warning("cycle: Slurm unavailable; no action this cycle")
        log.info("cycle done")
    assert path.read_text().splitlines() == [
        "<4>WARNING slurm_defrag.service.loop: cycle: Slurm unavailable; no action this cycle",
        "<6>INFO slurm_defrag.service.loop: cycle done",
    ]


def test_setup_adds_no_prefix_outside_journald(
    root_handlers: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    setup("INFO", as_json=False)
    logging.getLogger("slurm_defrag.x").warning("plain")
    assert capsys.readouterr().err == "WARNING slurm_defrag.x: plain\n"
