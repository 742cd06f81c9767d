"""``slurm-defrag simulate --workload db:URL``: the service's stored snapshots replayed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_run import assert_one_line_error, run_main
from infra import ROOT
from site_history import write_history

FAST = ("-p", "b", "--seeds", "1", "--policies", "first-fit,best-fit", "--warmup-h", "0")
SNAPSHOT = str(ROOT / "tests" / "fixtures" / "sacct" / "site-snapshot.json")


@pytest.fixture
def history(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'defrag.db'}"
    write_history(url)
    return url


def test_the_table_the_summary_and_the_precision_note(
    history: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    code = run_main("simulate", *FAST, "--workload", f"db:{history}")
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err.strip() == ""
    assert "Protocol B — defrag.db on site (1 nodes)" in out
    assert "first-fit" in out
    assert "best-fit" in out
    [summary] = [line for line in out.splitlines() if line.startswith("workload ")]
    assert summary.startswith(
        f"workload db:{history}: 5 snapshots of site from 2026-03-01 12:00 UTC to "
        "2026-03-01 12:40 UTC (every 10 min), 8 jobs seen, 5 jobs replayed on 1 nodes "
        "(8 GPUs) of site"
    )
    for left_out in (
        "1 earlier runs of requeued jobs",
        "1 left the queue never seen running (cancelled, or ran within one cycle)",
        "1 still running in the newest snapshot",
        "1 still waiting in the newest snapshot",
    ):
        assert left_out in summary
    [note] = [line for line in out.splitlines() if line.startswith("times from snapshots")]
    assert "4 of 5 starts are Slurm's StartTime" in note
    assert "up to 1 job ids between the first and last seen never appeared" in note
    [early] = [line for line in out.splitlines() if "before the first snapshot" in line]
    assert early.startswith("1 of the jobs replayed were submitted before the first snapshot")
    assert "--warmup-h 0.17" in early  # job 2, submitted 10 minutes before it


def test_json_output_and_the_nodes_of_a_snapshot_file(
    history: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_main("simulate", *FAST, "--workload", f"db:{history}", "-s", SNAPSHOT, "--json")
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    extra = doc["settings"]["extra"]
    assert extra["workload"] == f"db:{history}"
    assert (extra["jobs"], extra["nodes"]) == (5, 4)  # the file's four nodes
    assert all(r["jobs"] == 5 and r["unfinished"] == 0 for r in doc["runs"])


def test_a_password_is_never_shown(capsys: pytest.CaptureFixture[str]) -> None:
    line = assert_one_line_error(
        capsys, "simulate", "-p", "b", "--workload", "db:mysql://ann:s3cret@host/db"
    )
    assert "s3cret" not in line


@pytest.mark.parametrize(
    ("make", "words", "code"),
    [
        (lambda p: f"sqlite:///{p / 'typo.db'}", ("no such database file",), 3),
        (lambda p: (p / "e.db").touch() or f"sqlite:///{p / 'e.db'}", ("not a slurm-defrag",), 3),
        (lambda p: "sqlite:////nonexistent-dir/x.db", ("no such database file",), 3),
        (lambda p: "oracle://h/db", ("unsupported database",), 3),
    ],
)
def test_what_cannot_be_read_is_one_line(
    make: object, words: tuple[str, ...], code: int, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    assert callable(make)
    url = make(tmp_path)
    assert_one_line_error(capsys, "simulate", *FAST, "--workload", f"db:{url}", words=words)
    assert run_main("simulate", *FAST, "--workload", f"db:{url}") == code


def test_an_older_schema_is_one_line_and_left_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from slurm_defrag.store import migrate
    from slurm_defrag.store.engine import make_engine

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url)
    migrate.upgrade(engine, "0002")
    line = assert_one_line_error(
        capsys, "simulate", *FAST, "--workload", f"db:{url}",
        words=("schema revision 0002", "upgrade a copy"),
    )  # fmt: skip
    assert "Traceback" not in line
    assert migrate.current(engine) == "0002"
    engine.dispose()
    assert run_main("simulate", *FAST, "--workload", f"db:{url}") == 8


def test_the_choices_are_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert_one_line_error(
        capsys, "simulate", *FAST, "--workload", "mysql:x", words=("openb, sacct:FILE or db:URL",)
    )


def test_db_alone_is_the_database_the_other_commands_use(
    history: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_DEFRAG_DB_URL", history)
    code = run_main("simulate", *FAST, "--workload", "db:", "--json")
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["settings"]["extra"]["workload"] == f"db:{history}"


def test_protocol_a_takes_no_database(capsys: pytest.CaptureFixture[str]) -> None:
    assert_one_line_error(
        capsys, "simulate", "--workload", "db:sqlite:///x.db", words=("db:URL: Protocol B only",)
    )
