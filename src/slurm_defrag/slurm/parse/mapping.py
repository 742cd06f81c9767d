"""Pure helpers shared by every mapping of Slurm output to the domain model.

The OpenAPI JSON (:mod:`.openapi`), the ``scontrol`` text (:mod:`.scontrol_text`) and the
pyslurm objects (:mod:`slurm_defrag.slurm.pyslurm_adapter`) spell the same facts
differently; these helpers turn each fact into one domain value, and every failure into a
:class:`SlurmParseError` that names the field (``squeue --json: jobs[3].gres_detail[0]: ...``).

NVLink convention for pending jobs
----------------------------------
Slurm has no request flag for "my GPUs must be NVLink-connected". slurm-defrag reads it
from the job's admin comment, then its comment, as the key ``defrag:nvlink=K`` anywhere in
the text (separated by spaces, commas, semicolons or ``|``):

* ``K`` = 0 (or ``false``/``no``/``off``): the job does not need NVLink;
* ``K`` > 0 (or ``true``/``yes``/``on``): it does (K is meant as the NVLink block size the
  job needs, normally its GPUs per node; the domain keeps only "needed or not").

The admin comment wins because users cannot change it (a site's job_submit.lua is expected
to write it there). Without the key, NVLink is assumed needed when the per-node GPU count
is > 1 and <= 8: multi-GPU jobs on one node usually do collective communication, and more
than 8 GPUs do not fit one NVLink island anyway.
"""

from __future__ import annotations

import math
import re
import reprlib
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from slurm_defrag.domain.cluster import (
    GPU_MEMORY_GB,
    MAX_YEAR,
    MIN_YEAR,
    GpuRequest,
    JobState,
    NodeFlag,
    Reservation,
)
from slurm_defrag.domain.gres import (
    GresParseError,
    ShardUse,
    ascii_digits,
    gpu_entries,
    gpu_indices,
    shard_count,
    shard_use,
)
from slurm_defrag.domain.hostlists import expand_hosts
from slurm_defrag.domain.topology import MAX_GPUS_PER_NODE
from slurm_defrag.domain.units import MILLI, share_milli
from slurm_defrag.errors import InputError
from slurm_defrag.policy.comment_keys import COMMENT_KEYS, NVLINK_KEY, CommentField
from slurm_defrag.slurm.failures import SlurmParseError

M = TypeVar("M", bound=BaseModel)

NULLS = frozenset({"", "(null)", "None", "N/A", "n/a", "Unknown"})
"""Spellings of "no value" in Slurm text and JSON."""

FINISHED = frozenset(
    {
        JobState.COMPLETED,
        JobState.CANCELLED,
        JobState.FAILED,
        JobState.TIMEOUT,
        JobState.NODE_FAIL,
        JobState.PREEMPTED,
        JobState.BOOT_FAIL,
        JobState.DEADLINE,
        JobState.OUT_OF_MEMORY,
        JobState.SPECIAL_EXIT,
    }
)
"""Job states that hold nothing and wait for nothing; slurmctld keeps such jobs for
MinJobAge seconds. Snapshots leave them out (same rule for every backend)."""

# Slurm node state words that are spelt differently from NodeFlag, or mean one of them.
_NODE_WORD_ALIASES: dict[str, NodeFlag] = {
    "ALLOC": NodeFlag.ALLOCATED,
    "MIX": NodeFlag.MIXED,
    "INVALID": NodeFlag.INVAL,
    "INVALID_REG": NodeFlag.INVAL,
    "NO_RESPOND": NodeFlag.NOT_RESPONDING,
    "POWER_DOWN": NodeFlag.POWERED_DOWN,
    "POWERING_DOWN": NodeFlag.POWERED_DOWN,
    "POWER_DRAIN": NodeFlag.DRAIN,
    "MAINT": NodeFlag.MAINTENANCE,
    "REBOOT": NodeFlag.REBOOT_REQUESTED,
    "REBOOT_ISSUED": NodeFlag.REBOOT_REQUESTED,
    "ERROR": NodeFlag.FAIL,
}


# -- bounds on numbers from outside (checked before any work grows with them) ------------

MIN_NUMBER, MAX_NUMBER = -(2**63), 2**64 - 1
"""A JSON number must fit Slurm's 64-bit fields (uint64 NO_VAL64 included)."""

MAX_EPOCH = 253_402_300_799
"""9999-12-31T23:59:59Z: the last second a datetime holds. Slurm prints far-future ends
(year 2164 is recorded); beyond this is not a time."""

MAX_JOB_ID = 2**32 - 1
"""Slurm job ids (and array/het ids) are uint32."""

_SHOW = reprlib.Repr()
_SHOW.maxstring = _SHOW.maxother = 60
_SHOW.maxlist = _SHOW.maxdict = 4
_SHOW.maxlevel = 2

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def show(v: object) -> str:
    """A short repr for messages: bounded length and depth, whatever Slurm sent."""
    return _SHOW.repr(v)


def parse_error(where: str, field: str, problem: str) -> SlurmParseError:
    """The one error for unreadable Slurm output; one line whatever the input held.

    Field paths may carry names from Slurm (``layout.<node>``), so control characters
    (newlines, terminal escapes) are shown escaped.
    """
    message = f"{where}: {field}: {problem}"
    return SlurmParseError(_CONTROL.sub(lambda c: c[0].encode("unicode_escape").decode(), message))


class Doc:
    """A JSON object (or attribute bag) plus its path, so every error names its field."""

    def __init__(self, data: Any, where: str, path: str) -> None:
        if not isinstance(data, Mapping):
            problem = f"expected an object, got {_kind(data)}"
            raise parse_error(where, path or "(top level)", problem)
        self.data: Mapping[str, Any] = data
        self.where = where
        self.path = path

    def field(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def error(self, key: str, problem: str) -> SlurmParseError:
        return parse_error(self.where, self.field(key), problem)

    def req(self, key: str) -> Any:
        if key not in self.data:
            raise self.error(key, "missing")
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def text(self, key: str) -> str:
        """A string field; absent/null/``(null)`` give ``""``."""
        v = self.data.get(key)
        if v is None:
            return ""
        if not isinstance(v, str):
            raise self.error(key, f"expected a string, got {_kind(v)}")
        return "" if v in NULLS else v

    def number(self, key: str) -> int | None:
        """An integer, or 24.11's ``{"set", "infinite", "number"}``; unset/infinite = None."""
        return number(self.data.get(key), self.where, self.field(key))

    def time(self, key: str) -> datetime | None:
        return epoch(self.number(key), self.where, self.field(key))

    def flag(self, key: str, default: bool) -> bool:
        """A boolean field; absent or null give ``default``."""
        v = self.data.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise self.error(key, f"expected true or false, got {show(v)}")
        return v

    def strings(self, key: str) -> list[str]:
        """A list of strings (absent/null give ``[]``)."""
        items = self.array(key)
        for i, v in enumerate(items):
            if not isinstance(v, str):
                raise self.error(f"{key}[{i}]", f"expected a string, got {show(v)}")
        return items

    def array(self, key: str) -> list[Any]:
        v = self.data.get(key)
        if v is None:
            return []
        if not isinstance(v, list):
            raise self.error(key, f"expected a list, got {_kind(v)}")
        return v

    def sub(self, key: str) -> Doc:
        return Doc(self.req(key), self.where, self.field(key))

    def items(self, key: str) -> list[Doc]:
        base = self.field(key)
        return [Doc(v, self.where, f"{base}[{i}]") for i, v in enumerate(self.array(key))]


def _kind(v: object) -> str:
    return "null" if v is None else type(v).__name__


def number(v: Any, where: str, field: str) -> int | None:
    """An integer field (floats are truncated), bounded to 64 bits; null gives None."""
    if isinstance(v, Mapping):  # data_parser v0.0.39+: {"set": bool, "infinite": bool, "number": n}
        if v.get("infinite") or not v.get("set", True):
            return None
        v = v.get("number")
        field = f"{field}.number"
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise parse_error(where, field, f"expected a number, got {_kind(v)}")
    if isinstance(v, float) and not math.isfinite(v):
        raise parse_error(where, field, f"expected a number, got {v}")
    if not MIN_NUMBER <= v <= MAX_NUMBER:
        raise parse_error(where, field, f"number out of range: {show(v)}")
    return int(v)


def epoch(seconds: int | None, where: str = "Slurm", field: str = "time") -> datetime | None:
    """Epoch seconds -> aware UTC datetime; Slurm writes 0 for "never"."""
    if not seconds:
        return None
    if not 0 < seconds <= MAX_EPOCH:
        raise parse_error(where, field, f"time out of range: {seconds}")
    return datetime.fromtimestamp(seconds, UTC)


def text_time(value: str, where: str, field: str) -> datetime | None:
    """``2026-11-29T15:13:22`` from scontrol text.

    Read as UTC: the cli backend runs Slurm commands with ``TZ=UTC`` (and containers
    default to UTC), because the text carries no zone.
    """
    if value in NULLS:
        return None
    try:
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    except ValueError:
        raise parse_error(where, field, f"not a time: {value!r}") from None


def planned_start(state: JobState, read: Callable[[], datetime | None]) -> datetime | None:
    """A pending job's Slurm start time read as slurmctld's plan (``Job.planned_start``).

    For a pending job, Slurm's StartTime (``start_time`` in JSON and pyslurm) is when the
    scheduler expects the job to start (backfill's plan, or the main scheduler's estimate).
    It is not a fact, so the job's ``start_time`` stays None. Slurm's "no estimate" values
    arrive as None from ``read`` (the adapter's own time parser): ``Unknown``/``None`` in
    text, 0 or an unset or infinite number in JSON, None from pyslurm; the epoch itself is
    no plan either. Any other state has no planned start.

    An estimate is only advice, and its owner steers it (``sbatch --begin``): one that
    does not parse, or lies outside the years a snapshot holds, reads as "no plan" instead
    of failing the read, so no job can stop a cycle or change what is read of another.
    """
    if state != JobState.PENDING:
        return None
    try:
        start = read()
    except SlurmParseError:
        return None
    if start is None or start.timestamp() <= 0 or not MIN_YEAR <= start.year <= MAX_YEAR:
        return None
    return start


def duration_s(value: str, where: str, field: str) -> int | None:
    """Slurm durations ``[days-]hours:minutes:seconds`` (or ``minutes``); UNLIMITED = None."""
    if value in NULLS or value.upper() in ("UNLIMITED", "INFINITE", "PARTITION_LIMIT", "NONE"):
        return None
    # ASCII digits, at most 9 each: a duration is never longer than Slurm's uint32 minutes.
    m = re.fullmatch(r"(?:([0-9]{1,9})-)?([0-9]{1,9})(?::([0-9]{1,9}))?(?::([0-9]{1,9}))?", value)
    if not m:
        raise parse_error(where, field, f"not a duration: {show(value)}")
    days, a, b, c = (int(x) if x else 0 for x in m.groups())
    if m[4] is not None:  # h:m:s
        secs = a * 3600 + b * 60 + c
    elif m[3] is not None:  # with days: h:m; without: m:s (Slurm's own rule)
        secs = a * 3600 + b * 60 if m[1] else a * 60 + b
    else:
        secs = a * 3600 if m[1] else a * 60
    return days * 86400 + secs


def user_text(v: Any, where: str, field: str) -> str:
    """What a user typed (``-w``, ``-x``, ``--constraint``) as Slurm printed it back: only
    absent, empty and Slurm's ``(null)`` mean unset (a feature may be called ``None`` or
    ``Unknown``). pyslurm's list of constraint parts is joined back with commas."""
    if v is None:
        return ""
    if isinstance(v, list | tuple) and all(isinstance(x, str) for x in v):
        v = ",".join(v)
    if not isinstance(v, str):
        raise parse_error(where, field, f"expected a string, got {_kind(v)}")
    return "" if v in ("", "(null)") else v


def split_list(v: Any, where: str = "Slurm", field: str = "list") -> tuple[str, ...]:
    """``"a,b"`` or ``["a", "b"]`` -> ``("a", "b")``; nulls give ``()``."""
    if v is None:
        return ()
    if isinstance(v, str):
        items = v.split(",")
    elif isinstance(v, list | tuple):
        items = []
        for i, x in enumerate(v):
            if not isinstance(x, str):
                raise parse_error(where, f"{field}[{i}]", f"expected a string, got {show(x)}")
            items.append(x)
    else:
        raise parse_error(where, field, f"expected a list of strings, got {_kind(v)}")
    return tuple(s.strip() for s in items if s.strip() and s.strip() not in NULLS)


def expand_config_hosts(text: str, where: str) -> list[str]:
    """A host list from a file an admin wrote (slurm.conf, gres.conf, topology maps):
    sized before python-hostlist expands it, and one :class:`InputError` line naming
    ``where`` when it is malformed or larger than :data:`MAX_HOSTS`."""
    try:
        return list(expand_hosts(text))
    except ValueError as exc:
        raise InputError(f"{where}: bad host list {show(text)}: {exc}") from None


def expand_nodes(text: str, where: str, field: str) -> tuple[str, ...]:
    """``node[01-04,07]`` -> node names, via python-hostlist (never by hand).

    The size is bounded first (:func:`hostlist_size`): ``node[0-99999999]`` is refused,
    not expanded.
    """
    if text in NULLS:
        return ()
    try:
        return expand_hosts(text)
    except ValueError as exc:
        raise parse_error(where, field, f"bad host list {show(text)}: {exc}") from None


def node_flags(words: Iterable[str]) -> frozenset[NodeFlag]:
    """Slurm state words (any case, ``+``-joined or listed) -> NodeFlag set.

    Words slurm-defrag has no use for (``DYNAMIC_NORM``, ``BLOCKED``, ...) are dropped:
    Slurm adds flags between releases and an unknown flag must not stop the read.
    """
    out: set[NodeFlag] = set()
    for raw in words:
        for word in str(raw).replace("+", " ").split():
            w = word.upper().rstrip("*~#!%$@^-")
            flag = _NODE_WORD_ALIASES.get(w)
            if flag is None and w in NodeFlag.__members__:
                flag = NodeFlag(w)
            if flag is not None:
                out.add(flag)
    return frozenset(out) or frozenset({NodeFlag.UNKNOWN})


def job_state(v: Any, where: str, field: str) -> JobState:
    """``"RUNNING"`` (22.05) or ``["RUNNING", "COMPLETING"]`` (24.11) -> JobState.

    COMPLETING is a flag on top of the base state in 24.11; a completing job still holds
    its GPUs, so the flag wins.
    """
    words = [v] if isinstance(v, str) else list(v) if isinstance(v, list) else []
    if not words or not all(isinstance(w, str) for w in words):
        raise parse_error(where, field, f"expected a job state, got {show(v)}")
    words = [w.upper() for w in words]
    if "COMPLETING" in words:
        return JobState.COMPLETING
    try:
        return JobState(words[0])
    except ValueError:
        raise parse_error(where, field, f"unknown job state {show(words[0])}") from None


def job_id(
    raw: Any,
    array_job: int | None,
    array_task: int | None,
    het_job: int | None,
    het_offset: int | None,
    *,
    where: str = "Slurm",
    field: str = "job_id",
) -> str:
    """Slurm's display id: ``123``, array task ``120_3``, het component ``200+1``.

    Every part must be a Slurm id (0..2**32-1, ASCII digits): these ids reach argv.
    """
    if isinstance(raw, str) and ascii_digits(raw, 10):
        raw = int(raw)
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 < raw <= MAX_JOB_ID:
        raise parse_error(where, field, f"not a job id: {show(raw)}")
    for part in (array_job, array_task, het_job, het_offset):
        if part is not None and not 0 <= part <= MAX_JOB_ID:
            raise parse_error(where, field, f"job {raw}: id part out of range: {part}")
    if array_job and array_task is not None:
        return f"{array_job}_{array_task}"
    if het_job and het_offset is not None and het_offset > 0:
        return f"{het_job}+{het_offset}"
    return str(raw)


def gpu_inventory(gres: str, where: str, field: str) -> tuple[str | None, int]:
    """Configured GRES ``gpu:a100:8(S:0-1)`` -> (model, count).

    Untyped GPUs (``gpu:8``) get the model ``gpu``. A node with several GPU types is
    reported under its first type: the domain has one model per node.
    """
    try:
        entries = gpu_entries(gres)
    except GresParseError as exc:
        raise parse_error(where, field, str(exc)) from None
    count = sum(e.count for e in entries)
    if not count:
        return None, 0
    return next((e.type for e in entries if e.type), "gpu"), count


def indices(gres: str, where: str, field: str) -> frozenset[int]:
    """GPU indices in a ``gpu:a100:2(IDX:0-1)`` string (GresUsed, gres_detail, GRES=)."""
    try:
        return gpu_indices(gres)
    except GresParseError as exc:
        raise parse_error(where, field, str(exc)) from None


# -- shards (gres/shard, see domain/gres.py for the forms Slurm prints) ---------------


def shards_configured(gres: str, where: str, field: str) -> int:
    """``gpu:h100:8(S:0-1),shard:h100:32(S:0-1)`` -> 32."""
    try:
        return shard_count(gres)
    except GresParseError as exc:
        raise parse_error(where, field, str(exc)) from None


def shards_asked(tres: str, where: str, field: str) -> int:
    """``gres:shard:3`` / ``gres/shard:3`` / ``gres/shard=3`` (a job's per-node ask) -> 3."""
    if tres in NULLS:
        return 0
    return shards_configured(tres.replace("=", ":"), where, field)


def node_shard_use(gres_used: str, where: str, field: str) -> ShardUse:
    """A node's ``GresUsed`` shard entries."""
    try:
        return shard_use(gres_used, per_job=False)
    except GresParseError as exc:
        raise parse_error(where, field, str(exc)) from None


def job_shard_use(node: str, gres: str, where: str, field: str) -> list[tuple[str, int, int]]:
    """One node's ``GRES=shard:3(IDX:0)`` -> ``[(node, 0, 3)]``."""
    try:
        use = shard_use(gres, per_job=True)
    except GresParseError as exc:
        raise parse_error(where, field, str(exc)) from None
    return [(node, g, n) for g, n in sorted((use.counts or {}).items()) if n]


def node_milli(use: ShardUse, whole: frozenset[int], gpu_count: int) -> tuple[int, ...]:
    """``gpu_milli_used`` when ``use`` states shards used and configured per GPU (24.11+),
    else ``()`` (the snapshot fills it in from the jobs); whole-GPU jobs' GPUs are full."""
    if use.counts is None or use.totals is None:
        return ()
    return tuple(
        MILLI if g in whole else share_milli(use.counts.get(g, 0), use.totals.get(g, 0))
        for g in range(gpu_count)
    )


def node_gpu_fields(
    gres: str, gres_used: str | None, where: str, gres_field: str, used_field: str
) -> dict[str, Any]:
    """A node's GPU fields from its configured ``Gres`` and its ``GresUsed`` (None: the
    backend has no node-level use, pyslurm): model, count, memory, busy GPUs (whole-GPU
    jobs' and those carrying shards), per-GPU use when Slurm states it, shards configured."""
    model, count = gpu_inventory(gres, where, gres_field)
    out: dict[str, Any] = {
        "gpu_model": model,
        "gpu_count": count,
        "gpu_memory_gb": GPU_MEMORY_GB.get(model or "", 0.0),
        "shards": shards_configured(gres, where, gres_field),
    }
    if gres_used is not None:
        whole = indices(gres_used, where, used_field)
        use = node_shard_use(gres_used, where, used_field)
        out["gpus_used"] = whole | use.gpus
        if out["shards"]:
            out["gpu_milli_used"] = node_milli(use, whole, count)
    return out


def strip_reason_stamp(reason: str) -> str:
    """scontrol text appends `` [user@time]`` to a node's Reason; JSON does not."""
    return re.sub(r"\s*\[[^\]@]*@[^\]]*\]$", "", reason).strip()


def preempt_mode(words: Any, where: str = "Slurm", field: str = "preempt_mode") -> str:
    """``["requeue"]`` / ``"REQUEUE"`` / ``["disabled"]`` -> ``REQUEUE`` / ``OFF``."""
    items = {w.upper() for w in split_list(words, where, field)}
    if "DISABLED" in items:
        items = (items - {"DISABLED"}) | {"OFF"}
    return ",".join(sorted(items))


def reservation_state(start: datetime | None, end: datetime | None, now: datetime) -> str:
    """JSON has no reservation state; derive it the way slurmctld does."""
    if (start is None or start <= now) and (end is None or now < end):
        return "ACTIVE"
    return "INACTIVE"


def reservation(
    d: Doc, now: datetime, nodes: str, flags: Callable[[Doc], tuple[str, ...]]
) -> Reservation:
    """One reservation record in Slurm's JSON field names (slurmrestd and ``--json``, or
    pyslurm's ``to_dict()``): its host list under ``nodes``, its flags read by ``flags``."""
    start, end = d.time("start_time"), d.time("end_time")
    return build(
        Reservation,
        d.where,
        d.path,
        name=d.req("name"),
        nodes=expand_nodes(d.text(nodes), d.where, d.field(nodes)),
        start_time=start,
        end_time=end,
        users=split_list(d.get("users"), d.where, d.field("users")),
        accounts=split_list(d.get("accounts"), d.where, d.field("accounts")),
        flags=flags(d),
        state=reservation_state(start, end, now),
    )


# -- GPU requests --------------------------------------------------------------------

_NVLINK_KEY = re.compile(r"(?:^|[\s,;|])defrag:nvlink=([^\s,;|]+)", re.IGNORECASE)
_FALSE = frozenset({"0", "false", "no", "off"})
_TRUE = frozenset({"true", "yes", "on"})


def nvlink_from_comments(admin_comment: str, comment: str) -> bool | None:
    """The ``defrag:nvlink=K`` key (see module docstring), from the fields the one table of
    comment keys allows for it, in its order (:data:`~slurm_defrag.policy.comment_keys.
    COMMENT_KEYS`); None when absent or unreadable."""
    texts = {CommentField.ADMIN: admin_comment, CommentField.USER: comment}
    for field in COMMENT_KEYS[NVLINK_KEY].fields:
        m = _NVLINK_KEY.search(texts[field] or "")
        if m is None:
            continue
        value = m[1].lower()
        if value in _FALSE:
            return False
        if value in _TRUE or ascii_digits(value):
            return True
    return None


def default_nvlink(gpus_per_node: int | None) -> bool:
    return gpus_per_node is not None and 1 < gpus_per_node <= 8


def gpu_ask(text: str, where: str, field: str) -> tuple[int, str | None] | None:
    """``gres:gpu:4``, ``gres/gpu:a100:2``, ``gres/gpu=8`` -> (count, type or None)."""
    if text in NULLS:
        return None
    try:
        entries = [e for e in gpu_entries(text.replace("=", ":")) if e.count]
    except GresParseError as exc:
        raise parse_error(where, field, str(exc)) from None
    if not entries:
        return None
    types = {e.type for e in entries}
    return sum(e.count for e in entries), types.pop() if len(types) == 1 else None


def gpu_request(
    *,
    where: str,
    path: str,
    per_node: str = "",
    per_job: str = "",
    per_task: str = "",
    nodes: int | None = None,
    tasks: int | None = None,
    exclusive: bool = False,
    comment: str = "",
    admin_comment: str = "",
) -> GpuRequest | None:
    """What a job asks for, from its TRES-per-node / per-job / per-task strings.

    Per node wins (``--gres`` / ``--gpus-per-node``), then per job (``--gpus``), then per
    task (``--gpus-per-task`` x tasks). None when the job asks for no GPU, or for more GPUs
    per node than any node can hold (it can never start, so it is no fragmentation victim).
    """
    n = max(nodes or 1, 1)
    per_node_gpus: int | None = None
    total: int | None = None
    if ask := gpu_ask(per_node, where, f"{path}.tres_per_node"):
        per_node_gpus, model = ask
    elif ask := gpu_ask(per_job, where, f"{path}.tres_per_job"):
        total, model = ask
    elif ask := gpu_ask(per_task, where, f"{path}.tres_per_task"):
        total, model = ask[0] * max(tasks or 1, 1), ask[1]
    else:
        return None
    if per_node_gpus is not None and per_node_gpus > MAX_GPUS_PER_NODE:
        return None
    shape = per_node_gpus if per_node_gpus is not None else (total if n == 1 else None)
    nvlink = nvlink_from_comments(admin_comment, comment)
    return GpuRequest(
        nodes=n,
        gpus_per_node=per_node_gpus,
        total_gpus=total,
        gpu_model=model,
        nvlink=default_nvlink(shape) if nvlink is None else nvlink,
        whole_node=exclusive,
    )


def build(model: type[M], where: str, path: str, **fields: Any) -> M:
    """Construct a domain object; a validation failure names the Slurm field path."""
    try:
        return model(**fields)
    except ValidationError as exc:
        raise validation_error(exc, where, path) from None


def validation_error(exc: ValidationError, where: str, path: str) -> SlurmParseError:
    """The first problem of a failed domain model, as the parse error naming its field."""
    err = exc.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in err["loc"])
    field = f"{path}.{loc}" if loc else path
    return parse_error(where, field, err["msg"].removeprefix("Value error, "))


def natural_key(s: str) -> tuple[Any, ...]:
    """Sort ``node2`` before ``node10`` and job ``9`` before ``10``.

    ASCII digit runs (odd positions of the split) compare by value without int(): a name
    from Slurm may hold thousands of digits, or ``²`` (isdigit, yet no int).
    """
    parts = re.split(r"([0-9]+)", s)
    return tuple(
        (len(p.lstrip("0")), p.lstrip("0"), p) if i % 2 else p for i, p in enumerate(parts)
    )


def minutes_as_seconds(minutes: int | None) -> int | None:
    """Slurm's time limits are minutes (None: unlimited)."""
    return None if minutes is None else minutes * 60
