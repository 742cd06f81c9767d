"""``store/site_jobs.py``: the stored snapshots read back as a site's finished jobs
(``simulate --workload db:URL``), each time rule on the history of ``site_history``."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from site_history import T0, at, write_history
from slurm_defrag.errors import InputError
from slurm_defrag.store import migrate
from slurm_defrag.store.database_errors import (
    DatabaseUnreachable,
    DatabaseUrlError,
    SchemaNotCurrent,
    SchemaTooNew,
)
from slurm_defrag.store.engine import make_engine
from slurm_defrag.store.site_jobs import (
    EARLIER_RUNS,
    NEVER_SEEN_RUNNING,
    STILL_RUNNING,
    STILL_WAITING,
    read_stored_jobs,
    unseen_ids,
)


def test_each_job_of_the_history_as_the_snapshots_show_it(db_url: str) -> None:
    write_history(db_url)
    stored = read_stored_jobs(db_url)
    jobs = {j.job_id: j for j in stored.read.jobs}
    # (submit, start, run time) in minutes from T0
    got = {
        k: ((j.submit_t - T0.timestamp()) / 60, (j.start_t - T0.timestamp()) / 60, j.run_s / 60)
        for k, j in jobs.items()
    }
    assert got == {
        "1": (0, 7, 18),  # Slurm's StartTime; ended between 20 and 30: halfway, 25
        "2": (-10, -5, 5),  # ran before the first snapshot; 15 min, cut to its 5-min limit
        "6": (0, 15, 10),  # the second run is replayed: 15 to halfway between 20 and 30
        "7": (0, 10, 5),  # no StartTime: the first snapshot showing it running
        "9": (0, 9, 26),
    }
    assert [j.job_id for j in stored.read.jobs] == ["2", "1", "6", "7", "9"]  # submit order
    one = jobs["1"]
    shape = (one.nodes, one.gpus, one.cpus, one.memory_mb, one.gpu_model)
    assert shape == (1, 2, 4, 16_000, "h100")
    assert (one.user, one.account, one.partition, one.qos, one.time_limit_s) == (
        "ann", "physics", "batch", "high", 3600.0,
    )  # fmt: skip
    assert (jobs["6"].runs, jobs["1"].runs) == (2, 1)
    assert stored.read.skipped == {
        EARLIER_RUNS: 1, NEVER_SEEN_RUNNING: 1, STILL_RUNNING: 1, STILL_WAITING: 1,
    }  # fmt: skip
    assert stored.read.problems == []
    assert (stored.cluster, stored.snapshots, stored.period_s) == ("site", 5, 600.0)
    assert (stored.first_t, stored.last_t) == (at(0), at(40))
    assert (stored.jobs_seen, stored.exact_starts, stored.unseen_ids) == (8, 4, 1)
    assert stored.newest is not None
    assert [n.name for n in stored.newest.nodes] == ["g1"]
    assert read_stored_jobs(db_url, inventory=False).newest is None


def test_an_unreadable_version_is_one_line_and_its_job_is_left_out(sqlite_url: str) -> None:
    write_history(sqlite_url)
    engine = make_engine(sqlite_url)
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE job_states SET body = '{\"id\": \"1\", \"state\": \"WAITING\"}' "
                 "WHERE job_ref = (SELECT id FROM jobs WHERE job_id = '1') AND state = 'RUNNING'")
        )  # fmt: skip
        conn.execute(
            text("UPDATE job_states SET body = 'not json' "
                 "WHERE job_ref = (SELECT id FROM jobs WHERE job_id = '9')")
        )  # fmt: skip
    engine.dispose()
    stored = read_stored_jobs(sqlite_url)
    assert sorted(j.job_id for j in stored.read.jobs) == ["2", "6", "7"]
    assert stored.read.skipped["bad records"] == 2
    one, nine = stored.read.problems
    assert "(job 1): state: Input should be" in one
    assert one.startswith(f"{sqlite_url}: job_states row ")
    assert "(job 9): body: Invalid JSON" in nine


def test_a_start_time_after_the_snapshot_that_saw_it_running_is_one_line(
    sqlite_url: str,
) -> None:
    write_history(sqlite_url)
    engine = make_engine(sqlite_url)
    with engine.begin() as conn:  # job 7 (no StartTime) given one an hour late
        conn.execute(
            text("UPDATE job_states SET body = json_set(body, '$.start_time', "
                 "'2026-03-01T13:10:00Z') WHERE job_ref = (SELECT id FROM jobs WHERE job_id = '7')")
        )  # fmt: skip
    engine.dispose()
    stored = read_stored_jobs(sqlite_url)
    [line] = stored.read.problems
    assert "job 7: StartTime 2026-03-01T13:10:00Z is after the snapshot of" in line
    seven = next(j for j in stored.read.jobs if j.job_id == "7")
    assert seven.start_t == at(10)


def test_a_missing_file_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "typo.db"
    with pytest.raises(InputError, match="no such database file"):
        read_stored_jobs(f"sqlite:///{path}")
    assert not path.exists()


def test_a_database_without_schema_or_snapshots_has_nothing_to_replay(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(InputError, match="not a slurm-defrag database"):
        read_stored_jobs(f"sqlite:///{empty}")
    url = f"sqlite:///{tmp_path / 'new.db'}"
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    with pytest.raises(InputError, match="holds no snapshot: nothing to replay"):
        read_stored_jobs(url)


def test_another_schema_revision_is_named_and_nothing_is_migrated(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url)
    migrate.upgrade(engine, "0002")
    with pytest.raises(SchemaNotCurrent, match="at schema revision 0002, this slurm-defrag reads"):
        read_stored_jobs(url)
    assert migrate.current(engine) == "0002"
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(SchemaTooNew, match="revision 9999"):
        read_stored_jobs(url)
    engine.dispose()


def test_a_bad_url_or_a_file_that_is_no_database(tmp_path: Path) -> None:
    with pytest.raises(DatabaseUrlError, match="unsupported database"):
        read_stored_jobs("mysql://x@host/db")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is no SQLite file" * 100)
    with pytest.raises(DatabaseUnreachable, match=r"junk\.db"):
        read_stored_jobs(f"sqlite:///{junk}")


@pytest.mark.parametrize(
    ("ids", "unseen"),
    [([], 0), (["5"], 0), (["1", "2", "4"], 1), (["10", "12_3", "13+1", "x"], 1)],
)
def test_unseen_ids_count_the_gaps_of_plain_ids(ids: list[str], unseen: int) -> None:
    assert unseen_ids(ids) == unseen
