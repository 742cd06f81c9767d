"""``scontrol show {job -d, node -d, partition, reservation}`` text -> domain objects.

Used where Slurm has no JSON (22.05 has no ``scontrol ... --json``: partitions and
reservations), as the fallback when ``--json`` is refused, and to cross-check the per-node
GPU indices of jobs (``Nodes=node[05-06] ... GRES=gpu:a100:2(IDX:0-1)``: one detail line
per group of nodes with identical allocations, so the host list is expanded).

The multi-line format (without ``-o``) is parsed: free-text fields such as a node's
``Reason=`` or a job's ``Comment=`` then start their own line and may contain spaces.

Job records are hostile input (job owners write names, comments, paths; Slurm prints them
verbatim, newlines included: checked on 22.05 and 24.11), so they are not read as "every
``Key=`` token" but with the layout of ``slurm_sprint_job_info`` (:func:`job_records`):

* ``JobName`` is the rest of the first line (``-J 'x JobId=1'`` is a name, not an id);
* every further line must start with a key Slurm prints there, *after* the previous
  line's key in Slurm's order; a line that does not is the continuation of the free-text
  value before it (name, command, work dir, comments, std paths) - so a forged
  ``\n   AdminComment=x`` after a ``Comment=`` is part of the comment - or, after any
  other line, a problem;
* a key appears once per record, the required lines are all there, the record ends the
  way Slurm ends one, and no two records start with the same ``JobId=``.

A record with a problem is not trusted (the callers in :mod:`slurm_defrag.slurm.cli_backend`
decide what that means). One forgery the structure cannot see: a newline in a value
followed by a key that comes later in the order and that the real record lacks
(``--chdir $'/x\n   AdminComment=defrag:protect'`` on a job without an admin comment).
:func:`check_one_liners` catches it: ``-o`` prints a record on one line and a newline
inside a value breaks that line, so a record without problems must be exactly one line
of ``scontrol show job -d -o``. (The ``-o`` form alone would not do: there a value's
spaces cannot be told from the separators.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from slurm_defrag.domain.cluster import (
    GpuRequest,
    Job,
    JobState,
    Node,
    Partition,
    RecordPart,
    Reservation,
)
from slurm_defrag.domain.gres import ascii_digits
from slurm_defrag.slurm.parse import cpu_memory
from slurm_defrag.slurm.parse import mapping as m
from slurm_defrag.slurm.parse.records import JobParts, JobsRead

P = RecordPart

# Keys whose value is the rest of the line when they start it (they may contain spaces).
_FREE_TEXT = frozenset(
    {
        "Reason",
        "Comment",
        "AdminComment",
        "SystemComment",
        "OS",
        "Command",
        "SubmitLine",
        "WorkDir",
        "StdErr",
        "StdIn",
        "StdOut",
        "Extra",
    }
)
_KEY = re.compile(r"^([A-Za-z][\w/:.]*)=")


@dataclass
class Record:
    """One ``Key=Value`` record; ``details`` holds a job's per-node ``Nodes=...`` lines."""

    fields: dict[str, str] = field(default_factory=dict)
    details: list[dict[str, str]] = field(default_factory=list)


def parse_line(line: str) -> dict[str, str]:
    out: dict[str, str] = {}
    last: str | None = None
    for tok in re.finditer(r"\S+", line):
        km = _KEY.match(tok.group())
        if km is None:
            if last is not None:  # a value with spaces: "OS=Linux 6.1 #1 SMP"
                out[last] += " " + tok.group()
            continue
        key = km[1]
        if key in _FREE_TEXT and tok.start() == len(line) - len(line.lstrip()):
            out[key] = line[tok.start() + len(key) + 1 :].rstrip()
            break
        out[key] = tok.group()[len(key) + 1 :]
        last = key
    return out


def parse_records(text: str) -> list[Record]:
    """A record starts at an unindented ``Key=`` line; the indented lines continue it.

    (Blank lines are not reliable separators: 24.11 prints a whitespace-only line inside a
    node record, before ``ReservationName=``.) A job's ``Nodes=`` lines become ``details``.
    """
    records: list[Record] = []
    cur: Record | None = None
    for line in text.splitlines():
        if "=" not in line:  # blank, or "No jobs in the system"
            continue
        fields = parse_line(line)
        if cur is None or not line[:1].isspace():
            cur = Record()
            records.append(cur)
        if "Nodes" in fields and "JobId" in cur.fields and line.lstrip().startswith("Nodes="):
            cur.details.append(fields)
        else:
            cur.fields.update(fields)
    return records


def _val(r: Record, key: str) -> str:
    v = r.fields.get(key, "")
    return "" if v in m.NULLS else v


def _int(r: Record, key: str, where: str, path: str) -> int | None:
    v = _val(r, key).split("-", 1)[0]  # NumNodes=1-1 (min-max)
    if not v:
        return None
    # ASCII and bounded before int(): "²" passes isdigit(), 5,000 digits exceed int()'s limit
    if not ascii_digits(v, 19) or int(v) > m.MAX_NUMBER:
        raise m.parse_error(where, f"{path}.{key}", f"not an integer: {m.show(v)}")
    return int(v)


def nodes(text: str, where: str) -> list[Node]:
    out = []
    for i, r in enumerate(parse_records(text)):
        path = f"nodes[{i}]"
        if "NodeName" not in r.fields:
            raise m.parse_error(where, f"{path}.NodeName", "missing")
        out.append(
            m.build(
                Node,
                where,
                path,
                name=r.fields["NodeName"],
                partitions=m.split_list(_val(r, "Partitions")),
                state=m.node_flags([_val(r, "State")]),
                **m.node_gpu_fields(
                    _val(r, "Gres"), _val(r, "GresUsed"), where, f"{path}.Gres", f"{path}.GresUsed"
                ),
                reservation=_val(r, "ReservationName") or None,
                features=m.split_list(_val(r, "ActiveFeatures")),
                weight=_int(r, "Weight", where, path),
                reason=m.strip_reason_stamp(_val(r, "Reason")),
                **cpu_memory.node_fields(
                    cpus=_int(r, "CPUTot", where, path),
                    effective_cpus=_int(r, "CPUEfctv", where, path),
                    cpus_alloc=_int(r, "CPUAlloc", where, path),
                    memory=_memory(r, "RealMemory", where, path),
                    memory_spec=_memory(r, "MemSpecLimit", where, path),
                    memory_alloc=_memory(r, "AllocMem", where, path),
                ),
            )
        )
    return out


def _memory(r: Record, key: str, where: str, path: str) -> int | None:
    return cpu_memory.memory_mb(_val(r, key), where, f"{path}.{key}")


# -- job records: parsed in the order Slurm prints them -------------------------------
#
# slurm_sprint_job_info() (src/api/job_info.c in 22.05, src/scontrol/info_job.c in 24.11)
# prints one record per job: "JobId=%u [ArrayJobId=%u ArrayTaskId=%s | HetJobId=%u
# HetJobOffset=%u ]JobName=%s", then every further line after line_end = "\n   " (" " with
# -o), in a fixed order, then a last line_end and "\n\n" ("\n" with -o). Values are printed
# verbatim: a job name, comment or work directory may hold spaces, "Key=" and newlines.

# The keys that may start a line, in the order Slurm prints those lines (22.05 and 24.11
# merged: 22.05 prints TRES= and Power=, 24.11 ReqTRES=/AllocTRES=), each with the keys
# that line may carry. A key on a line that is not listed for that line is part of the
# value before it (``MailUser=a Comment=b``: a mail address with a space).
_LINES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    # 26.05: the job's SLUID on the line after JobId (its place before HetJobIdSet is
    # assumed: no heterogeneous job was recorded)
    (("SLUID",), ()),
    (("HetJobIdSet",), ()),
    (("UserId",), ("GroupId", "MCS_label")),
    (("Priority",), ("Nice", "Account", "QOS", "WCKey")),
    (("JobState",), ("Reason", "FailedNode", "Dependency")),
    (("Requeue",), ("Restarts", "BatchFlag", "Reboot", "ExitCode")),
    (("DerivedExitCode",), ()),
    (("RunTime",), ("TimeLimit", "TimeMin")),
    (("SubmitTime",), ("EligibleTime",)),
    (("AccrueTime",), ()),
    (("ResizeTime",), ()),
    (("StartTime",), ("EndTime", "Deadline")),
    (("CronJob", "CrontabSpec"), ("CrontabSpec",)),
    (("PreemptEligibleTime",), ("PreemptTime",)),
    (("SuspendTime",), ("SecsPreSuspend", "LastSchedEval", "Scheduler")),
    (("Partition",), ("AllocNode:Sid",)),
    (("ReqNodeList",), ("ExcNodeList",)),
    (("NodeList",), ("SchedNodeList",)),
    (("BatchFeatures", "BatchHost"), ("BatchHost",)),
    (("StepMgrEnabled",), ()),
    (("FedOrigin",), ("FedViableSiblings", "FedActiveSiblings")),
    (("NumNodes",), ("NumCPUs", "NumTasks", "CPUs/Task", "ReqB:S:C:T")),
    (("TRES", "ReqTRES"), ()),
    (("AllocTRES",), ()),
    (("Socks/Node",), ("NtasksPerN:B:S:C", "CoreSpec", "ThreadSpec")),
    (("JOB_GRES",), ()),
    (("Nodes",), ("CPU_IDs", "Mem", "GRES")),  # one line per group of nodes: repeats
    (("MinCPUsNode",), ("MinMemoryNode", "MinMemoryCPU", "MinMemoryTRES", "MinTmpDiskNode")),
    (("Features",), ("DelayBoot",)),
    (("ClusterFeatures",), ()),
    (("Prefer",), ()),
    (("Reservation",), ()),
    # 26.05 adds Exclusive and LicensesAlloc to this line
    (("OverSubscribe",), ("Exclusive", "Contiguous", "Licenses", "LicensesAlloc", "Network")),
    (("Command",), ()),
    (("SubmitLine",), ()),  # 26.05: the submitting command line, as its owner typed it
    (("WorkDir",), ()),
    (("AdminComment",), ()),
    (("SystemComment",), ()),
    (("Comment",), ()),
    (("Extra",), ()),
    (("StdErr",), ()),
    (("StdIn",), ()),
    (("StdOut",), ()),
    (("Switches",), ()),
    (("BurstBuffer",), ()),
    (("BurstBufferState",), ()),
    (("Power",), ()),
    (
        (
            "GresAllowTaskSharing",
            "GresEnforceBind",
            "GresOneTaskPerSharing",
            "KillOInInvalidDependent",
            "SpreadJob",
        ),
        (),
    ),
    (("OOMKillStep",), ()),
    (("CpusPerTres",), ()),
    (("MemPerTres",), ()),
    (("TresBind",), ()),
    (("TresFreq",), ()),
    (("TresPerJob",), ()),
    (("TresPerNode",), ()),
    (("TresPerSocket",), ()),
    (("TresPerTask",), ()),
    (("MailUser",), ("MailType",)),
    (("NtasksPerTRES",), ()),
    (("Container",), ("ContainerID",)),
    (("SELinuxContext",), ()),
    (("ResvPorts",), ()),
)
_SLOT = {key: i for i, (starts, _) in enumerate(_LINES) for key in starts}
_NODES_SLOT = _SLOT["Nodes"]
# Lines whose one value is the rest of the line (it may hold spaces and "Key="); they are
# also the only values that may continue over several lines.
_REST_OF_LINE = frozenset(
    {
        "Command",
        "SubmitLine",
        "WorkDir",
        "AdminComment",
        "SystemComment",
        "Comment",
        "Extra",
        "StdErr",
        "StdIn",
        "StdOut",
    }
)
_TRAILING_SPACE = frozenset({"AdminComment", "SystemComment", "Comment", "Extra"})
"""Printed as "Key=%s " (with a space after the value)."""
# Lines every job record has, whatever its state (22.05 and 24.11).
_REQUIRED = (
    "UserId",
    "Priority",
    "JobState",
    "Requeue",
    "RunTime",
    "SubmitTime",
    "StartTime",
    "SuspendTime",
    "Partition",
    "ReqNodeList",
    "NodeList",
    "NumNodes",
    "Socks/Node",
    "MinCPUsNode",
    "Features",
    "OverSubscribe",
    "Command",
    "WorkDir",
)
_FIRST_LINE = re.compile(
    r"JobId=(?P<JobId>[1-9][0-9]{0,9}) "
    r"(?:ArrayJobId=(?P<ArrayJobId>[0-9]{1,10}) ArrayTaskId=(?P<ArrayTaskId>\S+) "
    r"(?:ArrayTaskThrottle=(?P<ArrayTaskThrottle>[0-9]+) )?"
    r"|HetJobId=(?P<HetJobId>[0-9]{1,10}) HetJobOffset=(?P<HetJobOffset>[0-9]{1,10}) )?"
    r"JobName=(?P<JobName>.*)",
    re.ASCII,
)
_RECORD_START = re.compile(r"^JobId=", re.MULTILINE)
_LINE_KEY = re.compile(r"^ {3}( {2})?([A-Za-z][\w/:.]*)=")
_END = "\n   \n\n"
"""How a record ends up to 24.11: the last line_end, then "\n\n"."""
_END_26 = "\n\n"
"""How it ends from 26.05 (recorded 26.05.5): the last line, then "\n\n"; a value's own
"\n\n" cannot pass for it, as the next line then starts no record or repeats a JobId."""
# Values that change between two reads a moment apart; masked when a record is compared
# with its -o line (only the non-blank run after "Key=": never a space or a newline).
_MOVING = re.compile(
    r"(^| )(RunTime|LastSchedEval|StartTime|EndTime|EligibleTime|AccrueTime|Priority|"
    r"Reason|SchedNodeList|Scheduler)=[^ \n]*"
)


@dataclass
class JobRecord(Record):
    """One job of ``scontrol show job -d``, and why it cannot be trusted (if it cannot).

    ``problems`` empty means: every line is where Slurm prints it, no key twice, every
    required line there, the record ends as Slurm ends one and no other record has this
    JobId. ``text`` is the record as printed (for the one-line comparison).
    """

    job_id: str = ""
    text: str = ""
    problems: list[str] = field(default_factory=list)
    continued: bool = False
    """A value ran over several lines: a newline inside a name, comment, path."""


def job_records(text: str) -> list[JobRecord]:
    """Every record of ``scontrol show job -d`` text, with its problems noted.

    A record starts at a line beginning with ``JobId=`` (where Slurm starts one; a value
    holding a newline can start one too: that record, and the one it cut short, then have
    problems or share a JobId with the real record, and are not trusted).
    """
    starts = [mt.start() for mt in _RECORD_START.finditer(text)]
    ends = [*starts[1:], len(text)] if starts else []  # no record ("No jobs in the system")
    out = [_job_record(text[a:b]) for a, b in zip(starts, ends, strict=True)]
    seen: dict[str, int] = {}
    for r in out:
        seen[r.job_id] = seen.get(r.job_id, 0) + 1
    for r in out:
        if seen[r.job_id] > 1:
            r.problems.append(f"JobId={r.job_id} starts {seen[r.job_id]} records")
    return out


def _job_record(chunk: str) -> JobRecord:
    r = JobRecord(text=chunk)
    first, _, rest = _record_body(r, chunk).partition("\n")
    head = _FIRST_LINE.fullmatch(first)
    if head is None:
        match = re.match(r"JobId=(\S*)", first)
        r.job_id = match[1] if match else ""
        r.problems.append("the first line is not JobId=... JobName=...")
        return r
    r.job_id = head["JobId"]
    r.fields.update({k: v for k, v in head.groupdict().items() if v is not None})
    _read_lines(r, rest.split("\n") if rest else [])
    for key in _TRAILING_SPACE & set(r.fields):
        r.fields[key] = r.fields[key].removesuffix(" ")
    missing = [k for k in _REQUIRED if k not in r.fields]
    if missing:
        r.problems.append(f"no {missing[0]}= line")
    return r


def _record_body(r: JobRecord, chunk: str) -> str:
    """The record without the blank line(s) Slurm ends it with (a problem if it has none)."""
    if chunk.endswith(_END):
        return chunk[: -len(_END)]
    if chunk.endswith(_END[:-2]):  # cut at "\n\n" (tests) or the last record of a file
        return chunk[: -len(_END) + 2]
    if chunk.endswith(_END_26):
        return chunk[: -len(_END_26)]
    r.problems.append("the record does not end as Slurm ends one")
    return chunk


def _read_lines(r: JobRecord, lines: list[str]) -> None:
    """The lines after the first, each a known line in Slurm's order or the continuation
    of the value before it."""
    slot = -1
    last: str | None = "JobName"  # the key whose value continues on an unknown line
    for line in lines:
        km = _LINE_KEY.match(line)
        key = km[2] if km else None
        at = _SLOT.get(key or "")
        detail, in_order = _line_order(km, at, slot)
        if in_order and key is not None and at is not None:
            slot = at
            _take_line(r, line, key, detail)
            last = key if key in _REST_OF_LINE else None
        elif last is not None:
            # Not a line Slurm would print here: the value before goes on over this line.
            r.fields[last] += "\n" + line
            r.continued = True
        elif at is not None:
            r.problems.append(f"{key}= is out of order")
        elif not line.startswith("   "):
            r.problems.append(f"line {line[:40]!r} is not part of a job record")
        # else: a line of a newer Slurm we do not know (and do not read)


def _line_order(km: re.Match[str] | None, at: int | None, slot: int) -> tuple[bool, bool]:
    """(a ``Nodes=`` detail line, a known line where Slurm prints it after ``slot``)."""
    detail = at == _NODES_SLOT and km is not None and km[1] is not None
    in_order = at is not None and (at > slot or (detail and slot == _NODES_SLOT))
    if at is not None and (km[1] is not None) != (at == _NODES_SLOT):  # type: ignore[index]
        in_order = False  # "Nodes=" is indented by five, everything else by three
    return detail, in_order


def _take_line(r: JobRecord, line: str, key: str, detail: bool) -> None:
    parsed = _template_line(line.lstrip(" "), key)
    if detail:
        r.details.append(parsed)
        return
    twice = sorted(set(parsed) & set(r.fields))
    if twice:
        r.problems.append(f"{twice[0]}= appears twice")
    r.fields.update(parsed)


def _exclusive(r: Record) -> bool:
    """``--exclusive``: 26.05 prints ``Exclusive=NODE`` (``NO`` otherwise) and
    ``OverSubscribe=NO`` for every job that does not share (recorded 26.05.5); before
    26.05 there is no ``Exclusive=`` and an exclusive job shows ``OverSubscribe=NO``."""
    if "Exclusive" in r.fields:
        return _val(r, "Exclusive") not in ("", "NO")
    return _val(r, "OverSubscribe") == "NO"


def _template_line(line: str, key: str) -> dict[str, str]:
    """``Key=value Key2=value2`` of one known line; only that line's keys split it."""
    if key in _REST_OF_LINE:
        return {key: line[len(key) + 1 :]}
    allowed = {key, *_LINES[_SLOT[key]][1]}
    out: dict[str, str] = {}
    cur: str | None = None
    for tok in line.split(" "):
        k, sep, v = tok.partition("=")
        if sep and k in allowed and k not in out:
            out[k], cur = v, k
        elif cur is not None:
            out[cur] += " " + tok
    return out


def one_line(r: JobRecord) -> str:
    """The record as ``scontrol show job -d -o`` prints it, if no value holds a newline."""
    body = r.text[:-2] if r.text.endswith("\n\n") else r.text
    if not r.text.endswith((_END, _END[:-2])):
        # 26.05 layout (no blank last line): -o joins a "     Nodes=" detail line with
        # one space too, where 22.05/24.11 keep its indentation
        body = body.replace("\n     ", "\n   ")
    return body.replace("\n   ", " ")


def check_one_liners(records: Sequence[JobRecord], one_liner_text: str) -> None:
    """Note a problem on every record that ``-o`` does not print as exactly that one line.

    ``-o`` prints each record on one line, and a newline inside a value breaks it there.
    So a record whose values hold no newline is exactly one line of the ``-o`` output
    (the only one starting with its ``JobId=``), and a record that does - or one cut short
    or made up by such a value - is not: a line break turned into a line start in the
    multi-line text (``\n   AdminComment=x`` inside a work directory reads like a line of
    its own there) stays a line break in ``-o``. Values that change between the two reads
    (run time, scheduler times, priority, reason) are masked; they never hold a blank.
    """
    lines: dict[str, list[str]] = {}
    for line in one_liner_text.split("\n"):
        head = re.match(r"JobId=([0-9]+) ", line)
        if head:
            lines.setdefault(head[1], []).append(_MOVING.sub(r"\1\2=*", line))
    for r in records:
        found = lines.get(r.job_id, [])
        if len(found) != 1:
            r.problems.append(f"-o prints {len(found)} lines for JobId={r.job_id}")
        elif found[0] != _MOVING.sub(r"\1\2=*", one_line(r)):
            r.problems.append("-o prints it differently: a value holds a line break")


def jobs(text: str, where: str) -> list[Job]:
    """The jobs of records without problems, read strictly: a record with problems, or a
    field that does not read, raises (the cli backend reads with :func:`read_jobs`)."""
    out = []
    for i, r in enumerate(job_records(text)):
        if r.problems:
            raise m.parse_error(where, f"jobs[{i}]", "; ".join(r.problems))
        job = job_from_record(r, where, f"jobs[{i}]")
        if job is not None:
            out.append(job)
    return out


def read_jobs(records: Sequence[Record], where: str) -> JobsRead:
    """The jobs of trusted records (no problems), each on its own
    (:mod:`slurm_defrag.slurm.parse.records`): a field that does not read costs that job only."""
    out = JobsRead()
    for i, r in enumerate(records):
        out.add(partial(job_from_record, r, where, f"jobs[{i}]"))
    return out


def job_from_record(r: Record, where: str, path: str, parts: JobParts | None = None) -> Job | None:
    """The domain job of one record; None for a finished job. ``parts`` reads the fields
    (strict unless :func:`records.read_job` reads again)."""
    return _job(r, where, path, parts or JobParts())


def job_state(r: Record, where: str, path: str) -> JobState:
    return m.job_state(_val(r, "JobState"), where, f"{path}.JobState")


def text_value(r: Record, key: str) -> str:
    """A string field as the domain holds it (Slurm's "(null)" and friends: empty)."""
    return _val(r, key)


def display_id(r: Record, where: str, path: str) -> str:
    """``123``, ``120_3``, ``200+1``: the id the JSON and the writers use."""
    # A pending array's own record prints its task ranges (ArrayTaskId=1,3,5-7): it is the
    # job itself then, as in the JSON (whose array_task_id is unset there).
    task = _val(r, "ArrayTaskId")
    return m.job_id(
        r.fields["JobId"],
        _int(r, "ArrayJobId", where, path),
        int(task) if re.fullmatch(r"[0-9]{1,10}", task) else None,
        _int(r, "HetJobId", where, path),
        _int(r, "HetJobOffset", where, path),
    )


def _job(r: Record, where: str, path: str, parts: JobParts) -> Job | None:
    if "JobId" not in r.fields:
        raise m.parse_error(where, f"{path}.JobId", "missing")
    state = parts.ident(
        P.STATE, lambda: job_state(r, where, path), lambda: display_id(r, where, path)
    )
    if state in m.FINISHED:
        return None
    f: dict[str, Any] = {"id": parts.ident(P.JOB_ID, lambda: display_id(r, where, path))}
    f["state"] = state
    f |= parts.each(
        P.FIELD,
        {
            "name": lambda: _val(r, "JobName"),
            "user": lambda: _val(r, "UserId").split("(", 1)[0],
            "account": lambda: _val(r, "Account"),
            "partition": lambda: _val(r, "Partition"),
            "qos": lambda: _val(r, "QOS"),
            "priority": lambda: _int(r, "Priority", where, path) or 0,
            "reason": lambda: _val(r, "Reason"),
            "requeue": lambda: _val(r, "Requeue") != "0",
            "comment": lambda: _val(r, "Comment"),
            "admin_comment": lambda: _val(r, "AdminComment"),
        },
    )

    def start() -> datetime | None:
        # A pending job's StartTime is the scheduler's plan (or Unknown), not a fact.
        return m.text_time(_val(r, "StartTime"), where, f"{path}.StartTime")

    f |= parts.each(
        P.TIME,
        {
            "submit_time": lambda: m.text_time(_val(r, "SubmitTime"), where, f"{path}.SubmitTime"),
            "start_time": lambda: None if state == "PENDING" else start(),
            "planned_start": lambda: m.planned_start(state, start),
            "time_limit_s": lambda: m.duration_s(_val(r, "TimeLimit"), where, f"{path}.TimeLimit"),
        },
    )
    f["request"] = request = parts.one(P.GRES_REQUEST, lambda: _request(r, where, path, f), None)
    f |= parts.each(
        P.GRES_REQUEST,
        {"shards": lambda: m.shards_asked(_val(r, "TresPerNode"), where, f"{path}.TresPerNode")},
    )
    f |= parts.each(
        P.GPU_ALLOCATION,
        {"gpus": lambda: job_gpus(r, where, path), "shard_use": lambda: job_shards(r, where, path)},
    )
    f |= parts.each(
        P.NODE_LIMITS,
        {
            ours: partial(m.user_text, r.fields.get(key), where, f"{path}.{key}")
            for ours, key in (
                ("required_nodes", "ReqNodeList"),
                ("excluded_nodes", "ExcNodeList"),
                ("constraint", "Features"),
            )
        },
    )

    def use() -> dict[str, int]:
        need = _job_needs(r, where, path, cpu_memory.gpus_per_node(request))
        return cpu_memory.job_use(state, job_allocation(r, where, path), need)

    f |= parts.group(P.HOST_USE, use)
    return parts.build(where, path, f)


def _request(r: Record, where: str, path: str, fields: Mapping[str, Any]) -> GpuRequest | None:
    return m.gpu_request(
        where=where,
        path=path,
        per_node=_val(r, "TresPerNode"),
        per_job=_val(r, "TresPerJob"),
        per_task=_val(r, "TresPerTask"),
        nodes=_int(r, "NumNodes", where, path),
        tasks=_int(r, "NumTasks", where, path),
        exclusive=_exclusive(r),
        comment=fields.get("comment", ""),
        admin_comment=fields.get("admin_comment", ""),
    )


def _job_needs(r: Record, where: str, path: str, gpus: int) -> cpu_memory.HostUse:
    # NtasksPerN:B:S:C=2:0:*:* -> 2 tasks per node (0 = not given).
    tasks_per_node = _val(r, "NtasksPerN:B:S:C").split(":", 1)[0]
    return cpu_memory.needed(
        cpus=_int(r, "NumCPUs", where, path),
        nodes=_int(r, "NumNodes", where, path),
        cpus_per_task=_int(r, "CPUs/Task", where, path),
        tasks_per_node=int(tasks_per_node) if ascii_digits(tasks_per_node, 9) else None,
        min_cpus_per_node=_int(r, "MinCPUsNode", where, path),
        memory_per_node=_memory(r, "MinMemoryNode", where, path),
        memory_per_cpu=_memory(r, "MinMemoryCPU", where, path),
        gpus=gpus,
        cpus_per_gpu=cpu_memory.per_gpu(_val(r, "CpusPerTres"), where, f"{path}.CpusPerTres"),
        memory_per_gpu=cpu_memory.per_gpu(_val(r, "MemPerTres"), where, f"{path}.MemPerTres"),
    )


def job_allocation(r: Record, where: str, path: str) -> list[cpu_memory.HostUse]:
    """CPUs and memory per detail line (``Nodes=... CPU_IDs=0-3 Mem=4096 ...``)."""
    out = []
    for i, d in enumerate(r.details):
        field_ = f"{path}.Nodes[{i}]"
        cpus = cpu_memory.count_ids(d.get("CPU_IDs", ""), where, f"{field_}.CPU_IDs")
        memory = cpu_memory.memory_mb(d.get("Mem", ""), where, f"{field_}.Mem")
        out.append(cpu_memory.HostUse(cpus, memory or 0))
    return out


def job_gpus(r: Record, where: str, path: str) -> dict[str, frozenset[int]]:
    out: dict[str, frozenset[int]] = {}
    for i, d in enumerate(r.details):
        gres = d.get("GRES", "")
        if not gres:
            continue
        field_ = f"{path}.Nodes[{i}]"
        idx = m.indices(gres, where, f"{field_}.GRES")
        if not idx:  # shards only (GRES=shard:2(IDX:4)): no whole GPU, as in the JSON
            continue
        for node in m.expand_nodes(d.get("Nodes", ""), where, f"{field_}.Nodes"):
            out[node] = idx
    return out


def job_shards(r: Record, where: str, path: str) -> tuple[tuple[str, int, int], ...]:
    out: list[tuple[str, int, int]] = []
    for i, d in enumerate(r.details):
        gres = d.get("GRES", "")
        if "shard" not in gres:
            continue
        field_ = f"{path}.Nodes[{i}]"
        for node in m.expand_nodes(d.get("Nodes", ""), where, f"{field_}.Nodes"):
            out += m.job_shard_use(node, gres, where, f"{field_}.GRES")
    return tuple(out)


def partitions(text: str, where: str) -> list[Partition]:
    out = []
    for i, r in enumerate(parse_records(text)):
        path = f"partitions[{i}]"
        if "PartitionName" not in r.fields:
            raise m.parse_error(where, f"{path}.PartitionName", "missing")
        out.append(
            m.build(
                Partition,
                where,
                path,
                name=r.fields["PartitionName"],
                nodes=m.expand_nodes(_val(r, "Nodes"), where, f"{path}.Nodes"),
                priority_tier=_int(r, "PriorityTier", where, path) or 0,
                preempt_mode=m.preempt_mode(_val(r, "PreemptMode")),
            )
        )
    return out


def reservations(text: str, where: str, now: datetime) -> list[Reservation]:
    out = []
    for i, r in enumerate(parse_records(text)):
        path = f"reservations[{i}]"
        if "ReservationName" not in r.fields:
            raise m.parse_error(where, f"{path}.ReservationName", "missing")
        start = m.text_time(_val(r, "StartTime"), where, f"{path}.StartTime")
        end = m.text_time(_val(r, "EndTime"), where, f"{path}.EndTime")
        out.append(
            m.build(
                Reservation,
                where,
                path,
                name=r.fields["ReservationName"],
                nodes=m.expand_nodes(_val(r, "Nodes"), where, f"{path}.Nodes"),
                start_time=start,
                end_time=end,
                users=m.split_list(_val(r, "Users")),
                accounts=m.split_list(_val(r, "Accounts")),
                flags=tuple(sorted(f.upper() for f in m.split_list(_val(r, "Flags")))),
                state=_val(r, "State") or m.reservation_state(start, end, now),
            )
        )
    return out
