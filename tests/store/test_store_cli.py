"""``slurm-defrag db`` and ``slurm-defrag history`` from the command line.

Database trouble (a schema from a newer version, a server that is not there) must be one
line on stderr and a non-zero exit, never a traceback: those run the real CLI in a
subprocess. The other cases run in process (typer's runner), which is much faster.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import pytest
from sqlalchemy import text
from typer.testing import CliRunner, Result

from slurm_defrag.cli import app
from slurm_defrag.errors import ExitCode, InputError
from slurm_defrag.metrics.compute import compute
from slurm_defrag.store import migrate
from slurm_defrag.store.database import Store
from slurm_defrag.store.database_errors import DatabaseUrlError, NotFound
from slurm_defrag.store.engine import make_engine
from slurm_defrag.store.repo import Repository


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    """In process; DefragErrors surface as ``result.exception``."""
    return CliRunner().invoke(app, list(args), env=env)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slurm_defrag.cli", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def assert_one_line_error(done: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for word in words:
        assert word in lines[0]


def test_db_upgrade_current_downgrade(sqlite_url: str) -> None:
    assert "empty" in run("db", "current", "--db", sqlite_url).stdout
    up = run("db", "upgrade", "--db", sqlite_url)
    assert up.exit_code == 0, up.output
    assert f"upgraded from empty to revision {migrate.head()}" in up.stdout
    now = run("db", "current", "--db", sqlite_url)
    assert "(head)" in now.stdout
    assert "lease: read-only: leader lease not taken yet" in now.stdout
    down = run("db", "downgrade", "base", "--db", sqlite_url, "--yes")
    assert down.exit_code == 0, down.output
    assert "to empty" in down.stdout


def test_downgrade_base_needs_yes(sqlite_url: str) -> None:
    """Hostile input (issue 15): ``db downgrade base`` deleted everything without asking."""
    assert run("db", "upgrade", "--db", sqlite_url).exit_code == 0
    for target in ("base", "-1"):
        refused = run("db", "downgrade", "--db", sqlite_url, "--", target)
        assert refused.exit_code != 0
        assert isinstance(refused.exception, InputError)
        assert "--yes" in str(refused.exception)
    assert "(head)" in run("db", "current", "--db", sqlite_url).stdout  # nothing dropped


def test_newer_schema_is_one_clear_error(db_url: str) -> None:
    engine = make_engine(db_url)
    migrate.upgrade(engine)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999_from_the_future'"))
    engine.dispose()
    done = cli("history", "--db", db_url)
    assert_one_line_error(
        done, ExitCode.DB_SCHEMA, "9999_from_the_future", "newer", "upgrade slurm-defrag"
    )


@pytest.mark.parametrize(
    "url",
    ["postgresql+psycopg://defrag@127.0.0.1:1/defrag", "sqlite:////nonexistent-dir/x/defrag.db"],
)
def test_unreachable_database_is_one_clear_error(url: str) -> None:
    done = cli("history", "--db", url)
    assert_one_line_error(done, ExitCode.DB_UNREACHABLE, "cannot")


def test_bad_url_and_env_var(sqlite_url: str) -> None:
    assert isinstance(run("db", "current", "--db", "mysql://x/y").exception, DatabaseUrlError)
    # The env var names the database when --db is not given.
    assert "empty" in run("db", "current", env={"SLURM_DEFRAG_DB_URL": sqlite_url}).stdout


@pytest.fixture
def history_db(sqlite_url: str, churn_module: ModuleType) -> str:
    engine = make_engine(sqlite_url)
    migrate.upgrade(engine)
    engine.dispose()
    start = datetime.now(UTC) - timedelta(hours=6)
    sim = churn_module.Churn(48, seed=4, start=start, ends_per_min=0.1, arrivals_per_min=0.1)
    with Store.open(sqlite_url) as store:
        repo = Repository(store)
        for _ in range(24):
            snap = sim.step(15)
            repo.save_snapshot(snap, compute(snap))
    return sqlite_url


def test_history_views_json_and_plots(history_db: str, tmp_path: Path) -> None:
    png, page = tmp_path / "h.png", tmp_path / "h.html"
    done = run("history", "--since", "1d", "--db", history_db, "--json", "--plot", str(png))
    assert done.exit_code == 0, done.output
    h = json.loads(done.stdout)
    assert h["scope"] == "cluster"
    assert h["snapshots"] == 24
    assert h["nodes"]
    assert h["nodes"] == sorted(h["nodes"], key=lambda n: -n["unusable_gpu_hours"])
    assert {"t", "unusable", "falsely_starved", "unusable_memory_gb"} <= set(h["series"][0])
    assert h["worst"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 20_000  # a real figure, not an empty canvas

    text_out = run("history", "--since", "12h", "--partition", "high", "--db", history_db,
                   "--plot", str(page))  # fmt: skip
    assert text_out.exit_code == 0, text_out.output
    assert "partition high" in text_out.stdout
    assert "Most fragmented nodes" in text_out.stdout
    assert "GPU memory view" in text_out.stdout
    assert "<img" in page.read_text()

    unknown = run("history", "--partition", "nope", "--db", history_db)
    assert isinstance(unknown.exception, NotFound)
    assert "batch" in str(unknown.exception)
    assert isinstance(run("history", "--since", "soon", "--db", history_db).exception, InputError)

    pruned = run("db", "prune", "--db", history_db, "--json")
    assert pruned.exit_code == 0, pruned.output
    assert json.loads(pruned.stdout)["snapshots_deleted"] == 0  # all within 7 days


@pytest.mark.parametrize("since", ["99999999999w", "3661d", "9" * 400 + "w"])
def test_history_since_too_long_is_one_clear_error(since: str, sqlite_url: str) -> None:
    """``now - since`` would not be a date (a traceback before): the window is capped."""
    if since == "3661d":  # in process is enough for the message
        result = run("history", "--since", since, "--db", sqlite_url)
        assert isinstance(result.exception, InputError)
        assert "longer than 3660 days" in str(result.exception)
        return
    # 400 digits are refused before any arithmetic (not a duration at all)
    words = ("longer than 3660 days",) if len(since) < 20 else ("is not a duration",)
    assert_one_line_error(
        cli("history", "--since", since, "--db", sqlite_url), ExitCode.BAD_INPUT, "--since", *words
    )


# -- the default database's folder cannot be created (issue #45) ----------------------


@pytest.fixture(params=["home-is-a-file", "permission-denied"])
def no_default_folder(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """The default database's folder cannot be created, as for a service account whose
    home does not exist (``HOME=/nonexistent``): its parent is a file, or mkdir is refused
    (as root mkdir would succeed, so the refusal is made up). Returns the folder."""
    import slurm_defrag.store.engine as engine_module

    monkeypatch.delenv("SLURM_DEFRAG_DB_URL", raising=False)
    monkeypatch.setattr(engine_module.os, "geteuid", lambda: 1000)  # not root's /var/lib
    blocker = tmp_path / "state"
    blocker.write_text("not a folder\n")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))
    if request.param == "permission-denied":
        monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "nonexistent"))

        def refused(self: Path, *args: object, **kwargs: object) -> None:
            raise PermissionError(13, "Permission denied", str(self))

        monkeypatch.setattr(Path, "mkdir", refused)
        return tmp_path / "nonexistent" / "slurm-defrag"
    return blocker / "slurm-defrag"


@pytest.mark.parametrize(
    "args",
    [("history",), ("web", "--port", "0"), ("db", "upgrade"), ("db", "current"),
     ("db", "prune"), ("db", "downgrade", "base", "--yes")],
    ids=lambda a: " ".join(a),
)  # fmt: skip
def test_default_folder_not_creatable_is_one_line(
    args: tuple[str, ...], no_default_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was a PermissionError traceback (``HOME=/nonexistent``): now one line naming the
    folder and how to choose another database, exit 7."""
    from cli_run import assert_one_line_error as one_line_error
    from cli_run import run_main

    line = one_line_error(
        capsys, *args, words=(str(no_default_folder), "--db", "SLURM_DEFRAG_DB_URL")
    )
    assert "cannot create the default database folder" in line
    assert run_main(*args) == ExitCode.DB_UNREACHABLE
