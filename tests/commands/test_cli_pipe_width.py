"""Reports sent to a pipe or a file are never cut (issue #45).

Rich lays tables out for a terminal; to a pipe it assumed 80 columns (or ``COLUMNS``) and
shrank headers (``free/GP…``), wrapped cells and broke the legend mid-line. In process,
``capsys`` is such a pipe: each report must come out whole at COLUMNS=80, 200 and unset.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cli_run import run_main
from infra import EXAMPLES
from slurm_defrag.metrics.compute import compute
from slurm_defrag.snapshot_file import load_snapshot
from slurm_defrag.store import migrate
from slurm_defrag.store.database import Store
from slurm_defrag.store.engine import make_engine
from slurm_defrag.store.repo import Repository

COURSE = str(EXAMPLES / "course.json")


@pytest.fixture(params=["80", "200", None], ids=["COLUMNS=80", "COLUMNS=200", "no-COLUMNS"])
def columns(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str | None:
    for name in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    if request.param is not None:
        monkeypatch.setenv("COLUMNS", request.param)
    return request.param  # type: ignore[no-any-return]


def output(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    code = run_main(*args)
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def assert_whole(out: str, headers: list[tuple[str, ...]], lines: tuple[str, ...] = ()) -> None:
    """No cell cut (``…``), each table's header labels all on one line, each of ``lines``
    whole on one line."""
    assert "…" not in out, out
    rows = out.splitlines()
    for labels in headers:
        assert any(all(label in row for label in labels) for row in rows), (labels, out)
    for line in lines:
        assert any(line in row for row in rows), (line, out)


def test_frag(columns: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    out = output(capsys, "frag", "--snapshot", COURSE)
    assert_whole(
        out,
        [
            ("scope", "free/GPUs", "free GB", "max blk", "fits 1·2·4·8", "unusable s/t/c",
             "unus. GB", "FGD"),
            ("job", "request", "status", "why", "per node"),
        ],
        (
            "unusable: free GPUs no job of the mix can use now, by cause "
            "spatial/topology/configuration.",
            "falsely-starved (spatial)",
            "node04: topology: 4 free GPUs, but nvlink-pairs-8 never forms an NVLink block of "
            "3 (largest possible is 2)",
            "█ busy (colour = job)  □ free, in largest free NVLink block  · free, stranded  x "
            "node takes no new work",
        ),
    )  # fmt: skip


def test_plan(columns: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    out = output(capsys, "plan", "--snapshot", COURSE)
    assert_whole(
        out,
        [
            ("job", "user", "QOS", "GPUs", "since", "lost GPU-h", "cost", "why"),
            ("#", "action", "job", "nodes", "reservation", "expected", "reason"),
        ],
        (
            "DRY RUN: nothing is changed in Slurm",
            "holds GPU 5 of node01 in the block for job 110; no checkpoint: work since start lost",
            "start job 110 in the reservation",
        ),
    )


@pytest.fixture
def history_db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'defrag.db'}"
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    snap = load_snapshot(EXAMPLES / "course.json")
    now = datetime.now(UTC).replace(microsecond=0)
    with Store.open(url) as store:
        repo = Repository(store)
        for k in range(6, 0, -1):
            at = snap.model_copy(update={"taken_at": now - timedelta(minutes=20 * k)})
            repo.save_snapshot(at, compute(at))
    return url


def test_history(columns: str | None, history_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = output(capsys, "history", "--db", history_db)
    # fmt: off
    assert_whole(
        out,
        [
            ("from (UTC)", "unusable GPUs", "of free", "falsely starved (max)", "unusable GB"),
            ("node", "partitions", "unusable GPU·h", "held unusable", "max", "mean free",
             "unusable GB·h"),
        ],
        ("free GPU memory could not be used by any pending job",),
    )
    # fmt: on


def test_reports(columns: str | None, history_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    # report impact and causes printed on a plain rich Console until the commit after
    # 8162a18: a 30-min live run's impact.txt came out as "befo…", "no clear chan…"
    # ("a … b" is how they write an interval: a cut cell ends in "…" right after text)
    out = output(capsys, "report", "impact", "--db", history_db, "--change-at", "1h")
    assert not re.search(r"\S…", out), out
    assert any(all(h in row for h in ("before", "after", "change", "95 % interval"))
               for row in out.splitlines()), out  # fmt: skip
    out = output(capsys, "report", "causes", "--db", history_db)
    assert not re.search(r"\S…", out), out


NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
    f"openb-node-{i:04d},96000,262144,8,G2\n" for i in range(4)
)
PODS = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time," \
    "deletion_time,scheduled_time\n" + "".join(
        f"openb-pod-{i:04d},4000,8192,{1 + i % 2},1000,,LS,Running,{i * 10},{i * 10 + 500},"
        f"{i * 10}\n" for i in range(40)
    )  # fmt: skip


def test_simulate(columns: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from slurm_defrag.traces import openb

    trace = tmp_path / openb.FOLDER
    trace.mkdir()
    (trace / "openb_node_list_gpu_node.csv").write_text(NODES)
    (trace / "openb_pod_list_default.csv").write_text(PODS)
    out = output(capsys, "simulate", "--traces", str(tmp_path), "--seeds", "1",
                 "--policies", "first-fit,best-fit")  # fmt: skip
    # fmt: off
    assert_whole(
        out,
        [("policy", "unallocated % at 130 % (mean ± sd [min, max])", "paper", "Δ vs paper",
          "with defrag", "failed jobs", "s/run")],
        ("Protocol A — openb default, overlay none, 130% arrived",),
    )
    # fmt: on
