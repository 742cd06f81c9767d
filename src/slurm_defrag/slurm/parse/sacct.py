"""``sacct`` output read for the impact report and for the simulator.

* :func:`read_site_jobs`: a site's finished jobs (:class:`~slurm_defrag.domain.accounting.
  SiteJob`) from ``sacct -P`` text or ``sacct --json``, for ``simulate --workload
  sacct:FILE`` (docs/site-workload.md): a bad record is one line and is skipped, never the
  whole file; it shares the header and field readers below.
* :func:`read_sacct`: :class:`~slurm_defrag.domain.accounting.AccountedJob` records, what
  ``report impact --sacct FILE`` reads, to refine the waits the snapshots saw with the
  accounting database's exact submit and start times (below).

The impact report's file is what

    TZ=UTC sacct -a -X -P -S now-14days -E now \\
        -o JobID,Submit,Start,State,AllocTRES,ReqTRES > sacct.txt

prints: a header line naming the fields, then one line per job, fields split by ``|``.
JobID, Submit and Start are needed, in any order; AllocTRES or ReqTRES give the GPU count
(``gres/gpu=4``; AllocTRES first) of jobs the snapshots never saw; State is kept; other
fields are ignored. Job steps (``123.batch``, ``123.0``: without ``-X``) are skipped.
Times without a zone are UTC (hence ``TZ=UTC``); ``Unknown`` and ``None`` mean not yet.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from slurm_defrag.config_files import one_line
from slurm_defrag.domain.accounting import AccountedJob, SiteJob, SiteRead
from slurm_defrag.errors import InputError
from slurm_defrag.slurm.failures import SlurmParseError
from slurm_defrag.slurm.parse.mapping import Doc, show

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


def _header(it: Iterator[str], where: str, required: tuple[str, ...], hint: str) -> list[str]:
    """The header line's field names (lower case); :class:`InputError` if one is missing."""
    header: list[str] | None = None
    for raw in it:
        if raw.strip():
            header = [h.strip().lower() for h in raw.rstrip("\r\n").split("|")]
            break
    if header is None:
        raise InputError(f"{where}: empty: expected sacct -P output with its header line")
    missing = [f for f in required if f not in header]
    if missing:
        raise InputError(
            f"{where}: line 1: no {', '.join(missing)} field in the header "
            f"{one_line('|'.join(header))[:200]!r} ({hint}; without -n)"
        )
    return header


def parse_sacct(lines: Iterable[str], where: str = "sacct") -> list[AccountedJob]:
    it = iter(lines)
    header = _header(it, where, REQUIRED, "sacct -P -o JobID,Submit,Start,AllocTRES")
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


def _epoch(value: str) -> float | None:
    """Seconds since the epoch of a sacct time (UTC unless it names a zone); None for
    not yet. ValueError when it is no time: each reader words its own message."""
    if value.lower() in _NOT_YET:
        return None
    t = datetime.fromisoformat(value)
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


def _time(text: str, where: str, n: int, field: str) -> float | None:
    value = text.strip()
    try:
        return _epoch(value)
    except ValueError:
        raise InputError(
            f"{where}: line {n}: {field} {value[:40]!r} is not a time like 2026-12-01T14:00:00"
        ) from None


def _gpus(tres: str) -> int | None:
    text = tres.strip()
    if not text:
        return None
    m = _GPUS.search(text)
    if m is not None:
        return int(m[1])
    typed = [int(x) for x in _TYPED_GPUS.findall(text)]
    return sum(typed) if typed else 0


# -- a site's jobs for the simulator (simulate --workload sacct:FILE) --------------------

SITE_REQUIRED = ("jobid", "submit", "start")
SITE_FIELDS = (
    "JobID,JobName,User,Account,Partition,QOS,State,Submit,Start,End,Elapsed,Timelimit,"
    "NNodes,AllocCPUS,ReqCPUS,AllocTRES,ReqTRES,ReqMem"
)
"""The fields ``simulate --workload sacct:FILE`` reads from the text form
(docs/site-workload.md); others are ignored, and only JobID, Submit, Start and End or
Elapsed are needed."""
MAX_PROBLEMS = 100_000
"""Bad records remembered (each one line); more are counted only."""
_UNLIMITED = frozenset({"unlimited", "partition_limit", "infinite"})
_DURATION = re.compile(
    r"(?:(?P<d>[0-9]{1,6})-)?(?:(?P<h>[0-9]{1,6}):)?(?P<m>[0-9]{1,6}):(?P<s>[0-9]{1,2})"
    r"(?:\.[0-9]{1,6})?",
    re.ASCII,
)
_MEM = re.compile(r"([0-9]{1,15}(?:\.[0-9]{1,6})?)([KMGTP]?)([nc]?)", re.ASCII)
_MEM_UNIT_MB = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3}
_NO_VAL32 = 0xFFFFFFFE
"""Slurm's NO_VAL (and INFINITE = NO_VAL + 1) in 32-bit fields: no value."""


class _Bad(Exception):
    """One record cannot be read: ``field`` and ``problem`` say why."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


@dataclass
class _Record:
    """One accounting record as read, before requeued runs are merged."""

    job_id: str
    submit_t: float | None
    start_t: float | None
    end_t: float | None
    elapsed_s: float | None
    limit_s: float | None
    nodes: int
    cpus: int
    memory_mb: int
    gpus: int
    gpu_model: str | None
    user: str = ""
    account: str = ""
    partition: str = ""
    qos: str = ""
    state: str = ""


def read_site_jobs(path: Path) -> SiteRead:
    """A site's finished jobs from ``sacct -P`` text or ``sacct --json`` (found by the
    first character), for the simulator. A file that cannot be read at all is an
    :class:`InputError`; a bad record is one line in :attr:`SiteRead.problems`."""
    name = str(path)
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as exc:
        raise InputError(f"{name}: cannot read: {exc.strerror or exc}") from None
    if text.lstrip().startswith("{"):
        return parse_site_json(text, name)
    return parse_site_text(text.splitlines(), name)


def parse_site_text(lines: Iterable[str], where: str = "sacct") -> SiteRead:
    """The text form: ``sacct -a -X -P -D -o <fields>`` (module docstring)."""
    it = iter(lines)
    header = _header(it, where, SITE_REQUIRED, f"sacct -a -X -P -D -o {SITE_FIELDS}")
    if "end" not in header and "elapsed" not in header:
        raise InputError(f"{where}: line 1: the header has neither End nor Elapsed")
    col = {name: i for i, name in enumerate(header)}
    out = _Collector(where)
    for n, raw in enumerate(it, start=2):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        out.records += 1
        fields = line.split("|")
        job_id = one_line(fields[col["jobid"]].strip())[:40] if len(fields) > col["jobid"] else ""
        where_n = f"line {n}" + (f" (job {job_id})" if job_id else "")
        if len(line) > MAX_LINE:
            out.bad(where_n, "line", f"longer than {MAX_LINE} characters")
            continue
        if len(fields) != len(header):
            out.bad(
                where_n,
                "line",
                f"{len(fields)} fields, the header has {len(header)} "
                "(a JobName with '|' in it? leave JobName out)",
            )
            continue
        if not job_id:
            out.bad(where_n, "JobID", "empty")
            continue
        if "." in job_id:
            out.skip("job steps")
            continue
        try:
            out.add(_text_record(job_id, fields, col))
        except _Bad as exc:
            out.bad(where_n, exc.field, exc.problem)
    return out.done()


def _text_record(job_id: str, fields: list[str], col: dict[str, int]) -> _Record:
    def get(name: str) -> str:
        return fields[col[name]].strip() if name in col else ""

    def count(*names: str) -> int | None:
        for name in names:
            text = get(name)
            if text and text.lower() not in _NOT_YET:
                if not text.isascii() or not text.isdigit() or len(text) > 9:
                    raise _Bad(_FIELD_NAMES[name], f"{one_line(text)[:40]!r} is not a count")
                return int(text)
        return None

    alloc, req = get("alloctres"), get("reqtres")
    cpus = count("alloccpus", "reqcpus")
    if cpus is None or cpus == 0:
        cpus = _tres_count(alloc, "cpu") or _tres_count(req, "cpu") or 0
    memory = _tres_mem(alloc, "AllocTRES") or _tres_mem(req, "ReqTRES")
    nodes = count("nnodes") or 1
    if not memory and get("reqmem"):
        memory = _req_mem(get("reqmem"), nodes, cpus)
    gpus = _gpus(alloc) if alloc else None
    if gpus is None:
        gpus = _gpus(req) or 0
    return _Record(
        job_id=job_id,
        submit_t=_site_time(get("submit"), "Submit"),
        start_t=_site_time(get("start"), "Start"),
        end_t=_site_time(get("end"), "End"),
        elapsed_s=_duration(get("elapsed"), "Elapsed"),
        limit_s=_duration(get("timelimit"), "Timelimit"),
        nodes=nodes,
        cpus=cpus,
        memory_mb=memory,
        gpus=gpus,
        gpu_model=_gpu_model(req),
        user=one_line(get("user")),
        account=one_line(get("account")),
        partition=one_line(get("partition")),
        qos=one_line(get("qos")),
        state=one_line(get("state").split(" ")[0]).upper(),
    )


_FIELD_NAMES = {
    "alloccpus": "AllocCPUS",
    "reqcpus": "ReqCPUS",
    "nnodes": "NNodes",
}


def _site_time(text: str, field: str) -> float | None:
    value = text.strip()
    try:
        return _epoch(value)
    except ValueError:
        raise _Bad(
            field, f"{one_line(value)[:40]!r} is not a time like 2026-12-01T14:00:00"
        ) from None


def _duration(text: str, field: str) -> float | None:
    """``[D-]HH:MM:SS`` or ``MM:SS`` in seconds; UNLIMITED and empty are None."""
    value = text.strip()
    if value.lower() in _NOT_YET or value.lower() in _UNLIMITED:
        return None
    m = _DURATION.fullmatch(value)
    if m is None:
        raise _Bad(field, f"{one_line(value)[:40]!r} is not a duration like 1-02:03:04")
    days, hours = int(m["d"] or 0), int(m["h"] or 0)
    return float(((days * 24 + hours) * 60 + int(m["m"])) * 60 + int(m["s"]))


def _tres_entries(tres: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in tres.split(","):
        key, eq, value = part.strip().partition("=")
        if eq:
            out[key] = value
    return out


def _tres_count(tres: str, key: str) -> int:
    value = _tres_entries(tres).get(key, "")
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 9 else 0


def _mem_mb(value: str) -> float | None:
    m = _MEM.fullmatch(value.strip())
    return None if m is None else float(m[1]) * _MEM_UNIT_MB[m[2]]


def _tres_mem(tres: str, field: str) -> int:
    value = _tres_entries(tres).get("mem")
    if value is None:
        return 0
    mb = _mem_mb(value)
    if mb is None:
        raise _Bad(field, f"mem={one_line(value)[:20]!r} is not a size like 4G")
    return round(mb)


def _req_mem(value: str, nodes: int, cpus: int) -> int:
    """``ReqMem``: ``4G`` (per node; ``4Gn`` before 21.08) or ``4Gc`` (per CPU), as a
    total over the job's nodes."""
    m = _MEM.fullmatch(value.strip())
    if m is None:
        raise _Bad("ReqMem", f"{one_line(value)[:20]!r} is not a size like 4G")
    mb = float(m[1]) * _MEM_UNIT_MB[m[2]]
    return round(mb * (max(cpus, 1) if m[3] == "c" else nodes))


def _gpu_model(req: str) -> str | None:
    """The one GPU type a request names (``gres/gpu:a100=2``), else None (any)."""
    models = {
        key.split(":", 1)[1]
        for key, value in _tres_entries(req).items()
        if key.startswith("gres/gpu:") and value not in ("", "0")
    }
    return models.pop() if len(models) == 1 else None


def parse_site_json(text: str, where: str = "sacct --json") -> SiteRead:
    """The JSON form: ``sacct --json`` (the ``jobs`` list), Slurm 22.05's
    openapi/dbv0.0.38 layout (plain numbers, ``state.current`` a string) or data_parser
    v0.0.39+ (24.11: v0.0.42; numbers as ``{"set", "infinite", "number"}``,
    ``state.current`` a list)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{where}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except (ValueError, RecursionError):
        raise InputError(f"{where}: not valid JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise InputError(
            f"{where}: (top level): expected an object with a jobs list (sacct --json)"
        )
    out = _Collector(where)
    for i, job in enumerate(data["jobs"]):
        out.records += 1
        path = f"jobs[{i}]"
        try:
            d = Doc(job, where, path)
            record = _json_record(d)
        except SlurmParseError as exc:
            known = _json_id(job)
            message = str(exc).removeprefix(f"{where}: ")
            if message.startswith(f"{path}: "):
                field, problem = "record", message.removeprefix(f"{path}: ")
            else:
                field, _, problem = message.removeprefix(f"{path}.").partition(": ")
            out.bad(path + (f" (job {known})" if known else ""), field, problem)
            continue
        out.add(record)
    return out.done()


def _json_id(job: object) -> str:
    """The job's id for a message, if it reads at all."""
    try:
        return _job_id(Doc(job, "", ""))
    except SlurmParseError:
        return ""


def _job_id(d: Doc) -> str:
    job_id = d.number("job_id")
    if job_id is None or job_id <= 0:
        raise d.error("job_id", f"expected a job id, got {show(d.get('job_id'))}")
    array = d.get("array")
    if isinstance(array, dict):
        a = d.sub("array")
        array_id, task = a.number("job_id"), a.number("task_id")
        if array_id and task is not None and task < _NO_VAL32:
            return f"{array_id}_{task}"
    het = d.get("het")
    if isinstance(het, dict):
        h = d.sub("het")
        het_id, offset = h.number("job_id"), h.number("job_offset")
        if het_id and offset is not None and offset < _NO_VAL32:
            return f"{het_id}+{offset}"
    return str(job_id)


def _json_record(d: Doc) -> _Record:
    job_id = _job_id(d)
    t = d.sub("time")
    limit_min = t.number("limit")
    alloc, req = _json_tres_pair(d)
    required = d.sub("required") if isinstance(d.get("required"), dict) else None
    cpus = alloc.get("cpu") or (required.number("CPUs") if required else None) or req.get("cpu")
    nodes = d.number("allocation_nodes") or alloc.get("node") or 1
    memory = alloc.get("mem") or req.get("mem") or 0
    assoc = d.sub("association") if isinstance(d.get("association"), dict) else None
    current = _json_state(d)
    gpus = alloc["gres/gpu"] if "gres/gpu" in alloc else req.get("gres/gpu", 0)
    typed = {k.split(":", 1)[1] for k, v in req.items() if k.startswith("gres/gpu:") and v}
    return _Record(
        job_id=job_id,
        submit_t=_json_time(t, "submission"),
        start_t=_json_time(t, "start"),
        end_t=_json_time(t, "end"),
        elapsed_s=float(e) if (e := t.number("elapsed")) is not None else None,
        limit_s=None if limit_min is None or limit_min >= _NO_VAL32 else 60.0 * limit_min,
        nodes=int(nodes),
        cpus=int(cpus or 0),
        memory_mb=int(memory),
        gpus=int(gpus),
        gpu_model=typed.pop() if len(typed) == 1 else None,
        user=one_line(d.text("user")),
        account=one_line(d.text("account") or (assoc.text("account") if assoc else "")),
        partition=one_line(d.text("partition")),
        qos=one_line(d.text("qos")) if isinstance(d.get("qos"), str | None) else "",
        state=one_line(current).upper(),
    )


def _json_tres_pair(d: Doc) -> tuple[dict[str, int], dict[str, int]]:
    """(allocated, requested) TRES of a job record; empty where it has none."""
    tres = d.sub("tres") if d.get("tres") is not None else None
    if tres is None:
        return {}, {}
    return _json_tres(tres, "allocated"), _json_tres(tres, "requested")


def _json_state(d: Doc) -> str:
    """``state.current`` (a list of one from 23.02, a string before), or ``state``."""
    state = d.get("state")
    current: object = d.sub("state").get("current") if isinstance(state, dict) else state
    if isinstance(current, list):
        current = current[0] if current else ""
    if not isinstance(current, str):
        raise d.error("state.current", f"expected a state, got {show(current)}")
    return current


def _json_time(t: Doc, key: str) -> float | None:
    when = t.time(key)
    return None if when is None else when.timestamp()


def _json_tres(tres: Doc, key: str) -> dict[str, int]:
    """``tres.allocated``: ``[{"type": "gres", "name": "gpu:a100", "count": 2}, ...]`` as
    ``{"gres/gpu:a100": 2, "gres/gpu": 2, "cpu": 4, ...}`` (typed GPUs also summed into
    ``gres/gpu`` when the untyped count is absent)."""
    out: dict[str, int] = {}
    typed = 0
    for i, item in enumerate(tres.array(key)):
        e = Doc(item, tres.where, tres.field(f"{key}[{i}]"))
        kind, name = e.text("type"), e.text("name")
        n = e.number("count")
        if n is None or n < 0:
            continue
        k = f"{kind}/{name}" if name else kind
        out[k] = n
        if kind == "gres" and name.startswith("gpu:"):
            typed += n
    if "gres/gpu" not in out and typed:
        out["gres/gpu"] = typed
    return out


class _Collector:
    """Records in file order -> :class:`SiteRead`: requeued runs merged, jobs that never
    ran or still run skipped and counted."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.by_id: dict[str, list[_Record]] = {}
        self.problems: list[str] = []
        self.skipped: dict[str, int] = {}
        self.records = 0

    def skip(self, reason: str, n: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + n

    def bad(self, where: str, field: str, problem: str) -> None:
        self.skip("bad records")
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(one_line(f"{self.where}: {where}: {field}: {problem}"))

    def add(self, record: _Record) -> None:
        self.by_id.setdefault(record.job_id, []).append(record)

    def done(self) -> SiteRead:
        jobs: list[SiteJob] = []
        for job_id, runs in self.by_id.items():
            last = runs[-1]
            if len(runs) > 1:
                self.skip("earlier runs of requeued jobs", len(runs) - 1)
            submits = [r.submit_t for r in runs if r.submit_t is not None]
            if not submits:
                self.skip("no submit time")
                continue
            run = last.elapsed_s
            never = last.start_t is None or (
                # a job cancelled while pending: sacct shows Start = End, Elapsed 0
                last.state == "CANCELLED" and not run and last.start_t == last.end_t
            )
            if never:
                self.skip(
                    "cancelled before start" if last.state == "CANCELLED" else "never started"
                )
                continue
            assert last.start_t is not None
            if last.end_t is None or last.state in ("RUNNING", "PENDING", "REQUEUED"):
                self.skip("still running")
                continue
            if run is None:
                run = max(last.end_t - last.start_t, 0.0)
            jobs.append(
                SiteJob(
                    job_id=job_id,
                    submit_t=min(submits),
                    start_t=last.start_t,
                    run_s=run,
                    time_limit_s=last.limit_s,
                    nodes=last.nodes,
                    cpus=last.cpus,
                    memory_mb=last.memory_mb,
                    gpus=last.gpus,
                    gpu_model=last.gpu_model,
                    user=last.user,
                    account=last.account,
                    partition=last.partition,
                    qos=last.qos,
                    state=last.state,
                    runs=len(runs),
                )
            )
        jobs.sort(key=lambda j: (j.submit_t, j.job_id))
        return SiteRead(jobs, self.problems, self.skipped, self.records)
