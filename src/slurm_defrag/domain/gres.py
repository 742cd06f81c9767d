"""The one parser of Slurm GRES strings such as ``gpu:a100:4(IDX:0-1,4-5)``.

Slurm prints GPU use in several places (``GresUsed=`` on nodes, ``GRES=`` per node of a job,
``gres_detail`` / ``gres_used`` in JSON). They share one grammar::

    name[:type][:count][(IDX:ranges|S:sockets)]   joined by commas at top level

Index ranges are ``0-3``, ``0,4-6`` or ``N/A``. Parsing happens once, at the adapter
boundary; the rest of the code only sees :class:`GresEntry` with a frozenset of indices.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


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


# name, optional type (may contain '-', digits, '.'), optional count, optional (...) detail.
_ENTRY = re.compile(
    r"^(?P<name>[A-Za-z_][\w.-]*)"
    r"(?::(?P<type>(?!\d+(?:[(]|$))[^:(]+))?"
    r"(?::(?P<count>\d+))?"
    r"(?:\((?P<detail>[^)]*)\))?$"
)


def parse_index_ranges(text: str) -> frozenset[int]:
    """Parse ``0-1,4-6`` into ``{0, 1, 4, 5, 6}``; ``N/A`` and ``""`` give the empty set."""
    text = text.strip()
    if text in ("", "N/A", "(null)"):
        return frozenset()
    out: set[int] = set()
    for part in text.split(","):
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise GresParseError(f"bad GPU index range {part!r} in {text!r}")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise GresParseError(f"descending GPU index range {part!r} in {text!r}")
        out.update(range(first, last + 1))
    return frozenset(out)


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
            try:
                indices = parse_index_ranges(detail[4:])
            except GresParseError as exc:  # name the whole string, not only the range
                raise GresParseError(f"{exc} (GRES {text!r})") from None
        count = int(m["count"]) if m["count"] is not None else (
            len(indices) if indices is not None else 1
        )
        entries.append(GresEntry(m["name"], m["type"], count, indices))
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
