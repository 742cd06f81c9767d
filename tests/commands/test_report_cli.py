"""``slurm-defrag report impact`` and ``report causes`` from the command line: the tables,
``--json``, ``--plot``, ``--sacct``, and bad input as one line without a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import text

import impact_history as ih
from cli_run import assert_one_line_error, run_main
from slurm_defrag.errors import ExitCode
from slurm_defrag.store import migrate
from slurm_defrag.store.database import Store
from slurm_defrag.store.engine import make_engine

# The constructed history ends at ih.NOW; the commands' window ends there too.
UNTIL = ("--until", ih.NOW.isoformat())


def _url(path: Path) -> str:
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    return url


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = _url(tmp_path_factory.mktemp("report") / "h.db")
    with Store.open(url) as store:
        ih.build(store)
    return url


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one table row per line


def test_impact_table(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main("report", "impact", "--since", "1d", *UNTIL, "--db", db) == 0
    out = capsys.readouterr().out
    assert "change at 2026-06-01 10:00 UTC (the service's switch from dry-run to enforce" in out
    assert "wait, all jobs" in out
    assert "better" in out
    assert "1 job(s) submitted before the change and started after it" in out
    assert "seed 0" in out


def test_impact_json_plot_and_sacct(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png, sacct = tmp_path / "impact.png", tmp_path / "sacct.txt"
    sacct.write_text(
        "JobID|Submit|Start|AllocTRES\n4|2026-06-01T00:30:00|2026-06-01T02:00:00|gres/gpu=1\n"
    )
    code = run_main("report", "impact", "--since", "1d", *UNTIL, "--db", db, "--json",
                    "--plot", str(png), "--sacct", str(sacct), "--resamples", "200",
                    "--seed", "5")  # fmt: skip
    assert code == 0
    body = json.loads(capsys.readouterr().out)
    assert body["before"]["wait_mean_h"] == pytest.approx((1.5 + 4) / 2)
    assert body["resamples"] == 200
    assert body["seed"] == 5
    assert "sacct" in body["waits_from"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_causes_table_json_and_plot(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main("report", "causes", "--since", "1d", *UNTIL, "--db", db) == 0
    out = capsys.readouterr().out
    assert "43 stranded GPU-hours" in out
    assert "⇒ 4-GPU jobs of account fill on 8-GPU h100 NVSwitch nodes: 56 %" in out
    for title in (
        "Job lifecycles",
        "Request granularity",
        "Scheduling policy",
        "Topology constraints",
    ):
        assert title in out
    png = tmp_path / "causes.png"
    code = run_main(
        "report", "causes", "--since", "1d", *UNTIL, "--db", db, "--json", "--plot", str(png)
    )
    assert code == 0
    body = json.loads(capsys.readouterr().out)
    assert body["stranded_gpu_hours"] == pytest.approx(43.0)
    assert [d["key"] for d in body["dimensions"]] == [
        "lifecycles",
        "granularity",
        "policy",
        "topology",
    ]
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("command", ["impact", "causes"])
def test_an_empty_database_is_one_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _url(tmp_path / "empty.db")
    line = assert_one_line_error(capsys, "report", command, "--db", url, words=("no snapshots",))
    assert "nothing to report" in line


@pytest.mark.parametrize("command", ["impact", "causes"])
def test_a_window_without_data_is_one_line(
    command: str, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    words = ("no snapshots of cluster 'constructed' in this window", "widen --since")
    assert_one_line_error(capsys, "report", command, "--since", "1h", "--until",
                          "2026-07-01T00:00Z", "--db", db, words=words)  # fmt: skip


@pytest.mark.parametrize("command", ["impact", "causes"])
def test_an_older_schema_is_one_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url)
    migrate.upgrade(engine, "0002")
    engine.dispose()
    line = assert_one_line_error(capsys, "report", command, "--db", url,
                                 words=("revision 0002", "db upgrade"))  # fmt: skip
    assert line
    assert run_main("report", command, "--db", url) == ExitCode.DB_SCHEMA


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("impact", "--since", "a week"), ("--since", "a week")),
        (("causes", "--since", "-3d"), ("--since",)),
        (("impact", "--change-at", "yesterday"), ("--change-at", "yesterday")),
        (
            ("impact", "--change-at", "2026-05-01T00:00Z"),
            ("--change-at", "one period would be empty"),
        ),
        (("impact", "--until", "mode"), ("--until",)),
        (("causes", "--until", "noon"), ("--until", "noon")),
        (("impact", "--plot", "x.svg"), ("--plot", ".png")),
        (("impact", "--sacct", "/nonexistent/sacct.txt"), ("--sacct", "cannot read")),
    ],
)
def test_bad_options_are_one_line(
    args: tuple[str, ...], words: tuple[str, ...], db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    until = () if "--until" in args else UNTIL
    assert_one_line_error(capsys, "report", *args, *until, "--db", db, words=words)


def test_no_recorded_switch_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = _url(tmp_path / "dry.db")
    with Store.open(url) as store:
        ih.build(store)
        with store.engine.begin() as conn:
            conn.execute(text("UPDATE snapshots SET mode = 'dry-run'"))
    line = assert_one_line_error(capsys, "report", "impact", *UNTIL, "--db", url,
                                 words=("--change-at mode", "no switch"))  # fmt: skip
    assert "--change-at 2026-12-01T14:00Z" in line
