"""``sacct -P`` output read for ``report impact --sacct`` (slurm/parse/sacct.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from slurm_defrag.domain.accounting import AccountedJob
from slurm_defrag.errors import InputError
from slurm_defrag.slurm.parse.sacct import parse_sacct, read_sacct

OUTPUT = """\
JobID|Submit|Start|State|AllocTRES|ReqTRES
101|2026-12-01T10:00:00|2026-12-01T10:30:00|COMPLETED|billing=4,cpu=4,gres/gpu=4,node=1|cpu=4,gres/gpu=4
101.batch|2026-12-01T10:30:00|2026-12-01T10:30:00|COMPLETED|cpu=4,gres/gpu=4|
102_3|2026-12-01T11:00:00|Unknown|PENDING||cpu=1,gres/gpu:a100=2
103|2026-12-01T12:00:00+02:00|2026-12-01T12:10:00+02:00|CANCELLED by 0|cpu=2,mem=4G|cpu=2
104+1|None|2026-12-01T13:00:00|RUNNING|gres/gpu:h100=8,gres/gpu:h100x=0|
"""


def t(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_jobs_times_and_gpus() -> None:
    assert parse_sacct(OUTPUT.splitlines()) == [
        AccountedJob("101", t("2026-12-01T10:00"), t("2026-12-01T10:30"), 4, "COMPLETED"),
        AccountedJob("102_3", t("2026-12-01T11:00"), None, 2, "PENDING"),  # ReqTRES, typed
        AccountedJob("103", t("2026-12-01T10:00"), t("2026-12-01T10:10"), 0, "CANCELLED"),
    ]  # the step is skipped, and so is 104+1 (no submit time)


def test_fields_in_any_order_and_only_the_needed_ones(tmp_path: Path) -> None:
    path = tmp_path / "sacct.txt"
    path.write_text("Start|JobID|Submit\n2026-12-01T10:30:00|7|2026-12-01T10:00:00\n")
    assert read_sacct(path) == [
        AccountedJob("7", t("2026-12-01T10:00"), t("2026-12-01T10:30"), None, "")
    ]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", ("empty",)),
        ("JobID|Start\n1|2026-12-01T10:00:00\n", ("line 1", "submit")),
        ("JobID|Submit|Start\n1|2026-12-01T10:00:00\n", ("line 2", "2 fields", "3")),
        (
            "JobID|Submit|Start\n1|yesterday|2026-12-01T10:00:00\n",
            ("line 2", "Submit", "yesterday"),
        ),
    ],
)
def test_bad_output_names_the_line(text: str, words: tuple[str, ...]) -> None:
    with pytest.raises(InputError) as err:
        parse_sacct(text.splitlines(), "s.txt")
    assert str(err.value).startswith("s.txt")
    for word in words:
        assert word in str(err.value)


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--sacct: cannot read"):
        read_sacct(tmp_path / "nope.txt")
