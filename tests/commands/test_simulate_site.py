"""``slurm-defrag simulate --workload sacct:FILE``: a site's own jobs on its own nodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_run import assert_one_line_error, run_main
from infra import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "sacct"
SNAPSHOT = str(FIXTURES / "site-snapshot.json")
FAST = ("-p", "b", "--seeds", "1", "--policies", "first-fit,best-fit", "--warmup-h", "0")


def test_the_table_the_summary_and_one_line_per_bad_row(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    code = run_main(
        "simulate", *FAST, "--workload", f"sacct:{FIXTURES / 'site.txt'}", "-s", SNAPSHOT
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Protocol B — site.txt on site (4 nodes)" in out
    assert "first-fit" in out
    assert "best-fit" in out
    assert "refused at submit: 1 jobs a run" in out  # job 111: 12 GPUs, nodes have 8
    summary = [line for line in out.splitlines() if line.startswith("workload ")]
    assert summary
    assert "16 records, 7 jobs replayed on 4 nodes (20 GPUs) of site" in summary[0]
    assert "1 multi-node jobs" in summary[0]
    assert "3 bad records" in summary[0]
    lines = err.strip().splitlines()
    assert len(lines) == 3
    assert all("site.txt: line 1" in line for line in lines)
    assert "Traceback" not in err


@pytest.mark.parametrize("release", ["22.05", "24.11"])
def test_the_json_form_with_json_output_and_the_plot(
    release: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = FIXTURES / f"site-{release}.json"
    code = run_main(
        "simulate", *FAST, "--workload", f"sacct:{path}", "-s", SNAPSHOT, "--json",
        "--out", str(tmp_path),
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert doc["settings"]["extra"]["workload"] == f"sacct:{path}"
    assert doc["settings"]["extra"]["jobs"] == 4
    assert [r["policy"] for r in doc["runs"]] == ["first-fit", "best-fit"]
    assert all(r["jobs"] == 4 and r["unfinished"] == 0 for r in doc["runs"])
    assert (tmp_path / "protocol_b.png").stat().st_size > 0
    [bad] = err.strip().splitlines()
    assert "(job 208)" in bad


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--workload", "sacct:/nonexistent/sacct.txt", "-s", SNAPSHOT), ("cannot read",)),
        (("--workload", "squeue:x"), ("openb, sacct:FILE or db:URL",)),
        (("--workload", "sacct:"), ("openb, sacct:FILE or db:URL",)),
        (
            ("--workload", f"sacct:{FIXTURES / 'site.txt'}", "-s", SNAPSHOT, "--warmup-h", "3"),
            ("--warmup-h 3", "2.17 h"),
        ),
        (
            ("--workload", f"sacct:{FIXTURES / 'site.txt'}", "-s", SNAPSHOT, "--priority", "site"),
            ("--priority site",),
        ),
        (
            ("--workload", f"sacct:{FIXTURES / 'site.txt'}", "-s", "/nonexistent.json"),
            ("no such file",),
        ),
    ],
)
def test_what_cannot_run_is_one_line(
    args: tuple[str, ...], words: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    assert_one_line_error(capsys, "simulate", "-p", "b", "--seeds", "1", *args, words=words)


def test_protocol_a_takes_no_site_workload(capsys: pytest.CaptureFixture[str]) -> None:
    assert_one_line_error(
        capsys,
        "simulate",
        "--workload",
        f"sacct:{FIXTURES / 'site.txt'}",
        words=("Protocol B only",),
    )
