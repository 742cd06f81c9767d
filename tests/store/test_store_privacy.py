"""Hostile input (issue 15) for the store: secrets masked, the database private, a broken
URL or file one line and a non-zero exit through the real CLI."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cli_run import assert_one_line_error
from infra import ROOT
from slurm_defrag.errors import ExitCode
from slurm_defrag.store import migrate
from slurm_defrag.store.database_errors import DatabaseUrlError
from slurm_defrag.store.engine import make_engine, mask_password, parse_url, resolve_url

SECRET = "s3cr3t-pw"


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://defrag:{SECRET}@db:abc/defrag",  # non-numeric port: ValueError
        f"postgresql://defrag:{SECRET}@[::1/defrag",  # unclosed IPv6 bracket: ValueError
        f"postgresql://defrag:{SECRET}@db:99999/defrag",  # port out of range
        f"://defrag:{SECRET}@db/defrag",  # ArgumentError, which echoed the URL
        f"mysql://defrag:{SECRET}@db/defrag",  # unsupported backend
        f"postgresql://defrag:{SECRET}@x@db:/defrag",  # '@' inside the password
    ],
)
def test_bad_url_errors_mask_the_password(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Defect: the DB password was printed in "bad database URL" errors, and a
    non-numeric port was a ValueError traceback."""
    with pytest.raises(DatabaseUrlError) as err:
        parse_url(url)
    assert SECRET not in str(err.value)
    line = assert_one_line_error(capsys, "db", "current", "--db", url)
    assert SECRET not in line


def test_mask_password() -> None:
    assert mask_password("postgresql://u:p@w/d@h:5/db") == "postgresql://u:***@h:5/db"
    assert mask_password("postgresql://u@h/db") == "postgresql://u@h/db"
    assert mask_password("sqlite:////var/lib/x.db") == "sqlite:////var/lib/x.db"


def test_non_numeric_port_subprocess() -> None:
    """The console script itself: one line on stderr, exit 3, no traceback, no password."""
    done = subprocess.run(
        [sys.executable, "-m", "slurm_defrag.cli", "db", "current", "--db",
         f"postgresql://defrag:{SECRET}@db:abc/defrag"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == ExitCode.BAD_INPUT, done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert SECRET not in done.stderr


@pytest.mark.parametrize("command", [["db", "current"], ["db", "upgrade"], ["history"]])
def test_corrupted_sqlite_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    """Defect: garbage bytes as the SQLite file gave a sqlalchemy DatabaseError traceback."""
    db = tmp_path / "defrag.db"
    db.write_bytes(os.urandom(8192))
    assert_one_line_error(
        capsys, *command, "--db", f"sqlite:///{db}", words=("file is not a database",)
    )


def test_sqlite_file_is_created_private(tmp_path: Path) -> None:
    """Defect: the SQLite file (and its WAL) were created world-readable (umask 022),
    exposing every user's job names and comments (defeats Slurm's PrivateData)."""
    old = os.umask(0o022)
    try:
        db = tmp_path / "defrag.db"
        engine = make_engine(f"sqlite:///{db}")
        migrate.upgrade(engine)
        with engine.connect() as conn:  # WAL mode: the -wal and -shm files exist now
            conn.exec_driver_sql("SELECT 1")
            for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
                assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        engine.dispose()
    finally:
        os.umask(old)


def test_default_state_directory_is_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect: the default state directory was created 0750."""
    if os.geteuid() == 0:
        monkeypatch.setattr(os, "geteuid", lambda: 1000)  # the per-user default, not /var/lib
    monkeypatch.delenv("SLURM_DEFRAG_DB_URL", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    old = os.umask(0o022)
    try:
        url = resolve_url()
    finally:
        os.umask(old)
    assert url == f"sqlite:///{tmp_path}/state/slurm-defrag/defrag.db"
    assert stat.S_IMODE((tmp_path / "state" / "slurm-defrag").stat().st_mode) == 0o700


def test_existing_readable_database_is_left_alone_but_warned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "defrag.db"
    db.touch(mode=0o644)
    db.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="slurm_defrag.store.engine"):
        make_engine(f"sqlite:///{db}").dispose()
    assert stat.S_IMODE(db.stat().st_mode) == 0o644  # the admin's choice stands
    assert "other users can read" in caplog.text


def test_systemd_unit_keeps_the_state_private() -> None:
    unit = (ROOT / "contrib" / "slurm-defrag.service").read_text()
    lines = {line.strip() for line in unit.splitlines()}
    assert {"UMask=0077", "StateDirectory=slurm-defrag", "StateDirectoryMode=0700"} <= lines


def test_driver_messages_are_scrubbed_of_the_password() -> None:
    """A driver message that echoes the password (an invalid DSN, say) is masked too."""
    from slurm_defrag.store.engine import _scrub

    url = parse_url(f"postgresql://defrag:{SECRET}@db/defrag")
    assert _scrub(f"invalid dsn: password={SECRET}", url) == "invalid dsn: password=***"
