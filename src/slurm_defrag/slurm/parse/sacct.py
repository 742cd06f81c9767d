"""``sacct -P`` output as :class:`~slurm_defrag.domain.accounting.AccountedJob` records.

What ``report impact --sacct FILE`` reads, to refine the waits the snapshots saw with the
accounting database's exact submit and start times. The file is what

    TZ=UTC sacct -a -X -P -S now-14days -E now \\
        -o JobID,Submit,Start,State,AllocTRES,ReqTRES > sacct.txt

prints: a header line naming the fields, then one line per job, fields split by ``|``.
JobID, Submit and Start are needed, in any order; AllocTRES or ReqTRES give the GPU count
(``gres/gpu=4``; AllocTRES first) of jobs the snapshots never saw; State is kept; other
fields are ignored. Job steps (``123.batch``, ``123.0``: without ``-X``) are skipped.
Times without a zone are UTC (hence ``TZ=UTC``); ``Unknown`` and ``None`` mean not yet.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from slurm_defrag.domain.accounting import AccountedJob
from slurm_defrag.errors import InputError

REQUIRED = ("jobid", "submit", "start")
_NOT_YET = frozenset({"", "unknown", "none", "n/a"})
_GPUS = re.compile(r"(?:^|,)gres/gpu=([0-9]{1,9})(?:,|$)", re.ASCII)
_TYPED_GPUS = re.compile(r"(?:^|,)gres/gpu:[^=,]{1,64}=([0-9]{1,9})(?=,|$)", re.ASCII)
MAX_LINE = 64 * 1024


def read_sacct(path: Path) -> list[AccountedJob]:
    """The jobs of a ``sacct -P`` file; :class:`InputError` names the file and line."""
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            return parse_sacct(f, str(path))
    except OSError as exc:
        raise InputError(f"--sacct: cannot read {path}: {exc.strerror or exc}") from None


def parse_sacct(lines: Iterable[str], where: str = "sacct") -> list[AccountedJob]:
    it = iter(lines)
    header: list[str] | None = None
    for raw in it:
        if raw.strip():
            header = [h.strip().lower() for h in raw.rstrip("\r\n").split("|")]
            break
    if header is None:
        raise InputError(f"{where}: empty: expected sacct -P output with its header line")
    missing = [f for f in REQUIRED if f not in header]
    if missing:
        raise InputError(
            f"{where}: line 1: no {', '.join(missing)} field in the header {'|'.join(header)!r}"
            " (sacct -P -o JobID,Submit,Start,AllocTRES; without -n)"
        )
    col = {name: i for i, name in enumerate(header)}
    out: list[AccountedJob] = []
    for n, raw in enumerate(it, start=2):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        if len(line) > MAX_LINE:
            raise InputError(f"{where}: line {n}: longer than {MAX_LINE} characters")
        fields = line.split("|")
        if len(fields) != len(header):
            raise InputError(
                f"{where}: line {n}: {len(fields)} fields, the header has {len(header)} "
                "(a JobName with '|' in it? leave JobName out)"
            )
        job = _job(fields, col, where, n)
        if job is not None:
            out.append(job)
    return out


def _job(fields: list[str], col: dict[str, int], where: str, n: int) -> AccountedJob | None:
    job_id = fields[col["jobid"]].strip()
    if not job_id or "." in job_id:
        return None  # a step, or an empty id
    submit = _time(fields[col["submit"]], where, n, "Submit")
    if submit is None:
        return None
    start = _time(fields[col["start"]], where, n, "Start")
    gpus = None
    for name in ("alloctres", "reqtres"):
        if name in col and (found := _gpus(fields[col[name]])) is not None:
            gpus = found
            break
    state = fields[col["state"]].strip().split(" ")[0] if "state" in col else ""
    return AccountedJob(job_id=job_id, submit_t=submit, start_t=start, gpus=gpus, state=state)


def _time(text: str, where: str, n: int, field: str) -> float | None:
    value = text.strip()
    if value.lower() in _NOT_YET:
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        raise InputError(
            f"{where}: line {n}: {field} {value[:40]!r} is not a time like 2026-12-01T14:00:00"
        ) from None
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


def _gpus(tres: str) -> int | None:
    text = tres.strip()
    if not text:
        return None
    m = _GPUS.search(text)
    if m is not None:
        return int(m[1])
    typed = [int(x) for x in _TYPED_GPUS.findall(text)]
    return sum(typed) if typed else 0
