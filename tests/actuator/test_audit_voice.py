"""The auditing writer: the dry-run one records what it would issue, never as executed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from slurm_defrag.actuator.audit import AuditingWriter
from slurm_defrag.actuator.voice import ACTUAL, PREVIEW
from slurm_defrag.slurm.failures import SlurmRejectedError


class Log:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def record_command(self, argv: Sequence[str], **kw: Any) -> int:
        self.rows.append({"argv": list(argv), **kw})
        return len(self.rows)


class Refusing:
    """A writer whose requeue is refused and whose other writes succeed."""

    def requeue(self, job_id: str, reason: str) -> None:
        raise SlurmRejectedError(f"Invalid job id {job_id}")

    def delete_reservation(self, name: str) -> None:
        pass


@pytest.mark.parametrize("dry_run", [False, True])
def test_rows_and_voice_follow_the_writer(dry_run: bool) -> None:
    log = Log()
    w = AuditingWriter(Refusing(), log, dry_run=dry_run)  # type: ignore[arg-type]
    assert w.voice is (PREVIEW if dry_run else ACTUAL)
    w.delete_reservation("defrag-x")
    with pytest.raises(SlurmRejectedError):
        w.requeue("123", "frees GPUs")
    ok, refused = log.rows
    assert (ok["executed"], refused["executed"]) == (not dry_run, not dry_run)
    assert ok["dry_run"] is dry_run
    if dry_run:  # nothing ran in Slurm: no exit code, the refusal is conditional
        assert (ok["exit_code"], refused["exit_code"]) == (None, None)
        assert refused["stderr"] == "would be refused: Invalid job id 123"
    else:
        assert (ok["exit_code"], refused["exit_code"]) == (0, 1)
        assert refused["stderr"] == "Invalid job id 123"
