"""One job record at a time: a record a reader cannot understand costs that job, not the read.

Issue #40: Slurm accepts requests it cannot run (``--gres=gpu:abc:xyz:1`` is held, not
refused), so one user's record could make every snapshot fail, and every cycle with it,
for everyone. Every backend therefore maps its job records through :func:`read_job`:

1. The record is read **strictly**, exactly as before: the first field that does not read
   raises its :class:`~slurm_defrag.slurm.failures.SlurmParseError` (a well-formed record
   costs nothing more, and unit tests still see the field named).
2. A record that failed is read again **leniently**: each field that does not read is
   left at the domain's default, and the first one, with its :class:`RecordPart`, becomes
   the job's ``unreadable`` reason. The job keeps its id, state and whatever else did read
   and asks for nothing (``request=None``): never a target, and (protection
   ``unreadable-record``) never a victim.
3. A record whose id or state cannot be read, or that is no record at all, cannot be kept
   as a job: :class:`Unidentified` says why, and the list readers put the reason under
   :attr:`JobsRead.left_out`.

Only a document whose structure is broken (not JSON, no list of jobs) still fails the read.
Keeping the GPUs of such jobs busy is the backend's part (its nodes' own view of their
GPUs: ``GresUsed`` for cli and rest, the layouts for pyslurm); see
:func:`slurm_defrag.slurm.snapshot_assembly.assemble`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ValidationError

from slurm_defrag.domain.cluster import Job, RecordPart, record_reason
from slurm_defrag.slurm.failures import SlurmParseError
from slurm_defrag.slurm.parse import mapping as m

T = TypeVar("T")

P = RecordPart

# Job field -> the part of the record it comes from (validation errors name the field).
_FIELD_PART: dict[str, RecordPart] = {
    "id": P.JOB_ID,
    "state": P.STATE,
    "submit_time": P.TIME,
    "start_time": P.TIME,
    "planned_start": P.TIME,
    "time_limit_s": P.TIME,
    "gpus": P.GPU_ALLOCATION,
    "shard_use": P.GPU_ALLOCATION,
    "request": P.GRES_REQUEST,
    "shards": P.GRES_REQUEST,
    "cpus_per_node": P.HOST_USE,
    "memory_mb_per_node": P.HOST_USE,
    "required_nodes": P.NODE_LIMITS,
    "excluded_nodes": P.NODE_LIMITS,
    "constraint": P.NODE_LIMITS,
}
_IDENTITY = frozenset({"id", "state"})


class Unidentified(SlurmParseError):
    """A job record without a readable id or state, or no record at all: left out."""

    def __init__(self, part: RecordPart, message: str) -> None:
        super().__init__(message)
        self.part = part

    @property
    def reason(self) -> str:
        return record_reason(self.part, str(self))


class JobParts:
    """Reads the fields of one job record, each under the :class:`RecordPart` it belongs to.

    Strict (the default) lets the first failure raise. Lenient notes it instead and leaves
    the field out (the Job's default); :attr:`reason` names the first one and
    :attr:`failed` every part that did not read (the pyslurm backend needs to know whether
    the GPU allocation did).
    """

    def __init__(self, lenient: bool = False) -> None:
        self.lenient = lenient
        self.reason = ""
        self.failed: set[RecordPart] = set()

    def ident(
        self, part: RecordPart, read: Callable[[], T], job_id: Callable[[], str] | None = None
    ) -> T:
        """The job's id or state: a record without them cannot be kept. ``job_id`` names
        the job in the reason, if its id reads (the state is read first: a finished job is
        skipped whatever its other fields hold)."""
        try:
            return read()
        except SlurmParseError as exc:
            if not self.lenient:
                raise
            message = str(exc)
            if job_id is not None:
                with contextlib.suppress(SlurmParseError):  # unnamed, then
                    message += f" (job {job_id()})"
            raise Unidentified(part, message) from None

    def one(self, part: RecordPart, read: Callable[[], T], fallback: T) -> T:
        """One value; ``fallback`` when it does not read (lenient)."""
        if not self.lenient:
            return read()
        try:
            return read()
        except SlurmParseError as exc:
            self.note(part, str(exc))
            return fallback

    def each(self, part: RecordPart, readers: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
        """Job fields of one part, each read on its own: one that does not read (lenient)
        is left out, so the others are kept."""
        out: dict[str, Any] = {}
        for key, read in readers.items():
            try:
                out[key] = read()
            except SlurmParseError as exc:
                if not self.lenient:
                    raise
                self.note(part, str(exc))
        return out

    def group(self, part: RecordPart, read: Callable[[], Mapping[str, Any]]) -> dict[str, Any]:
        """Job fields read together (CPUs and memory come from one computation); none of
        them when it does not read (lenient)."""
        none: Mapping[str, Any] = {}
        return dict(self.one(part, read, none))

    def note(self, part: RecordPart, message: str) -> None:
        self.failed.add(part)
        if not self.reason:  # the first problem is the one named: one line per job
            self.reason = record_reason(part, message)

    def build(self, where: str, path: str, fields: dict[str, Any]) -> Job:
        """The Job; leniently, a field the model refuses (a time past 2199, a shard on GPU
        17) is dropped and noted like a field that did not parse."""
        if not self.lenient:
            return m.build(Job, where, path, **fields)
        for _ in range(len(fields) + 1):  # each round drops a field or ends
            if self.reason:
                fields.update(unreadable=self.reason, request=None)
            try:
                return Job(**fields)
            except ValidationError as exc:
                message = str(m.validation_error(exc, where, path))
                loc = exc.errors(include_url=False)[0]["loc"]
                key = str(loc[0]) if loc else ""
                part = _FIELD_PART.get(key, P.FIELD)
                if key in _IDENTITY:
                    raise Unidentified(part, message) from None
                if key not in fields or key == "unreadable":
                    raise Unidentified(P.RECORD, message) from None
                self.note(part, message)
                del fields[key]
        raise Unidentified(P.RECORD, f"{where}: {path}: not a job record")  # pragma: no cover


def json_job_head(
    r: JobParts,
    d: m.Doc,
    job_id: Callable[[], str],
    *,
    state_key: str,
    requeue_key: str,
) -> dict[str, Any] | None:
    """What the JSON-shaped records (slurmrestd / ``squeue --json`` and pyslurm's
    ``to_dict()``) share: id, state, the plain fields and the times, each read through
    ``r``. None for a finished job (it holds and waits for nothing). The two differ only in
    what the state, the id and the requeue flag are called."""
    state = r.ident(
        P.STATE, lambda: m.job_state(d.req(state_key), d.where, d.field(state_key)), job_id
    )
    if state in m.FINISHED:
        return None
    f: dict[str, Any] = {"id": r.ident(P.JOB_ID, job_id), "state": state}
    f |= r.each(
        P.FIELD,
        {
            "name": lambda: d.text("name"),
            "user": lambda: d.text("user_name"),
            "account": lambda: d.text("account"),
            "partition": lambda: d.text("partition"),
            "qos": lambda: d.text("qos"),
            "priority": lambda: d.number("priority") or 0,
            "reason": lambda: d.text("state_reason"),
            "requeue": lambda: d.flag(requeue_key, True),
            "comment": lambda: d.text("comment"),
            "admin_comment": lambda: d.text("admin_comment"),
        },
    )
    f |= r.each(
        P.TIME,
        {
            "submit_time": lambda: d.time("submit_time"),
            # A pending job's start_time is the scheduler's plan (0 or None: none), not a fact.
            "start_time": lambda: None if state == "PENDING" else d.time("start_time"),
            "planned_start": lambda: m.planned_start(state, lambda: d.time("start_time")),
            "time_limit_s": lambda: m.minutes_as_seconds(d.number("time_limit")),
        },
    )
    return f


def read_job(read: Callable[[JobParts], T]) -> tuple[T, JobParts]:
    """``read(parts)`` strictly, and again leniently if that failed (see the module
    docstring); raises :class:`Unidentified` for a record that cannot be kept."""
    strict = JobParts()
    try:
        return read(strict), strict
    except SlurmParseError:
        pass
    lenient = JobParts(lenient=True)
    try:
        return read(lenient), lenient
    except Unidentified:
        raise
    except SlurmParseError as exc:  # failed outside every part: the record as a whole
        raise Unidentified(P.RECORD, str(exc)) from None


@dataclass
class JobsRead:
    """The jobs of one list of records, and the reasons of the records left out."""

    jobs: list[Job] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)

    def add(self, read: Callable[[JobParts], Job | None]) -> None:
        """Read one record (finished jobs give None and are skipped)."""
        try:
            job, _ = read_job(read)
        except Unidentified as exc:
            self.left_out.append(exc.reason)
            return
        if job is not None:
            self.jobs.append(job)
