"""The one parser of Slurm GRES strings such as ``gpu:a100:4(IDX:0-1,4-5)``.

Slurm prints GPU use in several places (``GresUsed=`` on nodes, ``GRES=`` per node of a job,
``gres_detail`` / ``gres_used`` in JSON), and slurm.conf's ``Gres=`` configures it. They
share one grammar::

    name[:type][:no_consume][:count[K|M|G]][(IDX:ranges|S:sockets)]   joined by commas

(``no_consume`` and the count suffixes appear in slurm.conf only.)

Index ranges are ``0-3``, ``0,4-6`` or ``N/A``. Parsing happens once, at the adapter
boundary; the rest of the code only sees :class:`GresEntry` with a frozenset of indices.

Every number is checked before any work grows with it: Slurm output can carry what a
user typed, and ``IDX:0-99999999`` expanded first would take gigabytes next to slurmctld.
Only ASCII digits are digits (``"²".isdigit()`` is True, yet ``int("²")`` fails).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from slurm_defrag.domain.topology import MAX_GPUS_PER_NODE

MAX_DIGITS = 18
"""Longest digit run read as a number: enough for any 64-bit value Slurm prints, and far
below Python's int() limit (4,300 digits, a ValueError rather than a GresParseError)."""

MAX_GRES_COUNT = 2**32
"""Largest GRES count read; Slurm's own counts are far smaller (GPUs, shards, MPS shares)."""

MAX_RANGE_INDEX = 1 << 20
"""Largest index a generic range list may name (``parse_index_ranges`` default)."""


def ascii_digits(text: str, max_len: int = MAX_DIGITS) -> bool:
    """True for a non-empty run of ASCII ``0-9`` of at most ``max_len`` characters.

    ``str.isdigit()`` also accepts ``²`` or ``٣``; such text is not a Slurm number.
    """
    return 0 < len(text) <= max_len and text.isascii() and text.isdigit()


def index_intervals(text: str, limit: int, what: str = "GPU index") -> list[tuple[int, int]]:
    """``0-1,4-6`` -> ``[(0, 1), (4, 6)]`` without expanding; every index must be < limit.

    ``N/A``, ``(null)`` and ``""`` give ``[]``. Raises :class:`GresParseError`.
    """
    text = text.strip()
    if text in ("", "N/A", "(null)"):
        return []
    out: list[tuple[int, int]] = []
    for part in text.split(","):
        lo, sep, hi = part.partition("-")
        if not ascii_digits(lo) or (sep and not ascii_digits(hi)):
            raise GresParseError(f"bad {what} range {part[:40]!r} in {text[:200]!r}")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise GresParseError(f"descending {what} range {part!r} in {text[:200]!r}")
        if last >= limit:
            raise GresParseError(f"{what} {last} out of range (0..{limit - 1}) in {text[:200]!r}")
        out.append((first, last))
    return out


class GresParseError(ValueError):
    """A GRES string did not match Slurm's grammar."""


@dataclass(frozen=True, slots=True)
class GresEntry:
    """One ``name:type:count(...)`` item.

    ``indices`` is None when the string carried no ``IDX:`` part (configured GRES, requests).
    """

    name: str
    type: str | None
    count: int
    indices: frozenset[int] | None = None
    no_consume: bool = False
    detail: str | None = field(default=None, compare=False)
    """The raw ``(...)`` part (``IDX:0-1``, ``S:0-1``, 24.11's shard ``3/4,0/4``)."""


# name, optional type (may contain '-', digits, '.'), optional count, optional (...) detail.
# ASCII digits only (re.ASCII): a Unicode digit is not a count.
_ENTRY = re.compile(
    r"^(?P<name>[A-Za-z_][\w.-]*)"
    r"(?::(?P<type>(?!no_consume(?:[:(]|$))(?![0-9]+[KkMmGg]?(?:[(]|$))[^:(]+))?"
    r"(?::(?P<no_consume>no_consume))?"
    r"(?::(?P<count>[0-9]+)(?P<suffix>[KkMmGg])?)?"
    r"(?:\((?P<detail>[^)]*)\))?$",
    re.ASCII,
)
_SUFFIX = {None: 1, "k": 1024, "m": 1024**2, "g": 1024**3}
"""slurm.conf count suffixes (``gres.conf``/``slurm.conf`` man pages: K, M, G = 1024^n)."""


def parse_index_ranges(text: str, limit: int = MAX_RANGE_INDEX) -> frozenset[int]:
    """Parse ``0-1,4-6`` into ``{0, 1, 4, 5, 6}``; ``N/A`` and ``""`` give the empty set.

    Every index must be below ``limit``, checked before anything is expanded.
    """
    out: set[int] = set()
    for first, last in index_intervals(text, limit):
        out.update(range(first, last + 1))
    return frozenset(out)


def count_indices(text: str, limit: int = MAX_RANGE_INDEX, what: str = "index") -> int:
    """How many distinct indices a range list names, counted without expanding it."""
    count, end = 0, -1
    for first, last in sorted(index_intervals(text, limit, what)):
        if last > end:
            count += last - max(first, end + 1) + 1
            end = last
    return count


def format_index_ranges(indices: frozenset[int] | set[int]) -> str:
    """Inverse of :func:`parse_index_ranges`: ``{0,1,4,5,6}`` -> ``0-1,4-6``."""
    if not indices:
        return "N/A"
    items = sorted(indices)
    parts: list[str] = []
    start = prev = items[0]
    for i in items[1:]:
        if i == prev + 1:
            prev = i
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = i
    parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(parts)


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside parentheses (IDX lists contain commas)."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def parse_gres(text: str | None) -> list[GresEntry]:
    """Parse a full GRES string into entries; ``None``, ``""``, ``(null)`` give ``[]``.

    ``gres/gpu:a100:2`` (the TRES spelling) is accepted as ``gpu:a100:2``.
    """
    if text is None:
        return []
    text = text.strip()
    if text in ("", "(null)", "N/A"):
        return []
    entries = []
    for item in _split_top_level(text):
        item = item.removeprefix("gres/").removeprefix("gres:")
        m = _ENTRY.match(item)
        if not m:
            raise GresParseError(f"cannot parse GRES item {item!r} in {text!r}")
        detail = m["detail"]
        indices: frozenset[int] | None = None
        if detail is not None and detail.startswith("IDX:"):
            try:  # a node has at most MAX_GPUS_PER_NODE devices: indices 0..15
                indices = parse_index_ranges(detail[4:], limit=MAX_GPUS_PER_NODE)
            except GresParseError as exc:  # name the whole string, not only the range
                raise GresParseError(f"{exc} (GRES {text!r})") from None
        raw_count = m["count"]
        if raw_count is not None and not ascii_digits(raw_count):
            raise GresParseError(f"count {raw_count[:40]!r} is not a number in {text!r}")
        count = (
            int(raw_count) * _SUFFIX[(m["suffix"] or "").lower() or None]
            if (raw_count is not None)
            else (len(indices) if indices is not None else 1)
        )
        if count > MAX_GRES_COUNT:
            raise GresParseError(f"count {count} out of range in {text!r}")
        entries.append(
            GresEntry(m["name"], m["type"], count, indices, m["no_consume"] is not None, detail)
        )
    return entries


def gpu_entries(text: str | None) -> list[GresEntry]:
    """Only the ``gpu`` entries of a GRES string."""
    return [e for e in parse_gres(text) if e.name == "gpu"]


def gpu_indices(text: str | None) -> frozenset[int]:
    """Union of GPU indices in a GRES string with ``IDX:`` detail.

    Raises if a non-zero GPU count carries no index list: silently assuming indices would
    put jobs on the wrong GPUs.
    """
    out: set[int] = set()
    for e in gpu_entries(text):
        if e.indices is None:
            if e.count:
                raise GresParseError(f"GPU entry without IDX in {text!r}")
            continue
        if e.count and len(e.indices) != e.count:
            raise GresParseError(
                f"GPU count {e.count} does not match {len(e.indices)} indices in {text!r}"
            )
        out |= e.indices
    return frozenset(out)


# -- shards (gres/shard: a share of one GPU) ------------------------------------------
#
# Recorded on the compose cluster (node04: Gres=gpu:h100:8,shard:32, tests/fixtures/
# shards-*): Slurm prints shard use in two forms.
#   22.05  node GresUsed  shard:h100:2(IDX:0,4)   which GPUs carry shards; the count is
#                                                 the number of such GPUs, not of shards
#          job GRES=      shard:3(IDX:0)          the job's shards, on these GPUs
#   24.11  both           shard:h100:9(3/4,0/4,...)  shards used / configured, per GPU
#   26.05  the same, with "-/4" for a GPU a whole-GPU job holds (no shard may go there)
# A GPU that carries shards is given to no whole-GPU job (cons_tres keeps the two apart).

_SHARE = re.compile(r"^(?:[0-9]{1,9}|-)/[0-9]{1,9}$", re.ASCII)


@dataclass(frozen=True, slots=True)
class ShardUse:
    """Shards in use per GPU index, as one GRES string states them."""

    gpus: frozenset[int]
    """GPU indices that carry shards."""
    counts: dict[int, int] | None
    """Shards used per GPU index; None when the string does not say (22.05's node view)."""
    totals: dict[int, int] | None = None
    """Shards configured per GPU index, when the string says (24.11's ``u/t`` form)."""


def shard_use(text: str | None, *, per_job: bool) -> ShardUse:
    """The ``shard`` entries of a GRES string (see above); no entry gives no use.

    ``per_job``: the string is a job's (``GRES=`` / ``gres_detail``), whose IDX form's count
    is the job's shards. Spread over several GPUs that count is split evenly, rounded up (the
    22.05 form does not say how; a GPU's use is then over- rather than under-stated).
    """
    gpus: set[int] = set()
    counts: dict[int, int] = {}
    totals: dict[int, int] = {}
    exact = True
    for e in parse_gres(text):
        if e.name != "shard":
            continue
        detail = e.detail or ""
        if detail.startswith("IDX:") or detail in ("", "N/A"):
            idx = e.indices or frozenset()
            gpus |= idx
            if per_job and idx:
                for g in idx:
                    counts[g] = counts.get(g, 0) + -(-e.count // len(idx))
            elif idx:
                exact = False
            continue
        for g, share in enumerate(detail.split(",")):
            if not _SHARE.match(share) or g >= MAX_GPUS_PER_NODE:
                raise GresParseError(f"bad shard use {share[:40]!r} in {text!r}")
            left, _, right = share.partition("/")
            used, total = (0 if left == "-" else int(left)), int(right)  # "-": held whole
            if used > total:
                raise GresParseError(f"shard use {share!r} above the GPU's shards in {text!r}")
            totals[g] = totals.get(g, 0) + total
            if used:
                gpus.add(g)
                counts[g] = counts.get(g, 0) + used
    return ShardUse(frozenset(gpus), counts if exact else None, totals or None)


def shard_count(text: str | None) -> int:
    """Shards a configured GRES string (``gpu:h100:8,shard:32``) or a TRES ask
    (``gres/shard:3``, ``gres:shard:3``) names; 0 when none."""
    return sum(e.count for e in parse_gres(text) if e.name == "shard")
