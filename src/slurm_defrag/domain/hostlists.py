"""Slurm host lists (``node[01-04,07]``) sized before they are expanded.

python-hostlist expands eagerly (100,000 names per range, any number of ranges), and host
lists come from files an admin wrote and from what users typed (``-w``, ``-x``): each is
sized first, so ``node[0-99999999]`` is refused instead of filling the memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import hostlist

from slurm_defrag.domain.gres import ascii_digits

MAX_HOSTS = 65_536
"""Largest host list expanded; the biggest Slurm clusters have about 10,000 nodes."""

MAX_USER_LIST_CHARS = 65_536
"""Longest host list a user typed (``-w``/``-x``) that is read at all."""
_USER_LIST = re.compile(r"[A-Za-z0-9._\-\[\],]*")
"""What slurmctld prints back for a user's list: node names, ranges, commas. Anything
else (a newline makes python-hostlist recurse without end or drop the rest) is refused."""

_MAX_HOST_GROUPS = 8  # bracket groups in one host name: python-hostlist recurses per group


def hostlist_size(text: str) -> int:
    """How many names a host list expands to, at most (without expanding it).

    Raises ValueError when that is more than :data:`MAX_HOSTS`, or when a range bound is
    too long to be a node number. Malformed lists are left to python-hostlist to refuse.
    """
    total = 0
    for part in _top_level(text):
        groups = re.findall(r"\[([^\]]*)\]", part)
        if len(groups) > _MAX_HOST_GROUPS:
            raise ValueError(f"more than {_MAX_HOST_GROUPS} ranges in one name")
        names = 1
        for group in groups:
            size = 0
            for rng in group.split(","):
                lo, sep, hi = rng.partition("-")
                if not ascii_digits(lo, 12) or (sep and not ascii_digits(hi, 12)):
                    if len(rng) > 25:
                        raise ValueError(f"bad range {rng[:25]!r}...")
                    size += 1  # python-hostlist says what is wrong with it
                    continue
                size += max(int(hi) - int(lo) + 1, 1) if sep else 1
            names *= max(size, 1)
            if names > MAX_HOSTS:
                break
        total += names
        if total > MAX_HOSTS:
            raise ValueError(f"more than {MAX_HOSTS} names")
    return total


def _top_level(text: str) -> list[str]:
    """``a[1,2],b`` -> ``["a[1,2]", "b"]``: the commas outside brackets, in one pass (a
    look-ahead regex was quadratic on long flat lists)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def expand_user_hosts(text: str) -> tuple[str, ...]:
    """A host list a user typed (``-w``, ``-x``): only node-name characters, at most
    :data:`MAX_USER_LIST_CHARS` long, then :func:`expand_hosts`."""
    if len(text) > MAX_USER_LIST_CHARS:
        raise ValueError(f"longer than {MAX_USER_LIST_CHARS} characters")
    if not _USER_LIST.fullmatch(text):
        raise ValueError("characters a host list does not hold")
    return expand_hosts(text)


def expand_hosts(text: str, limit: int = MAX_HOSTS) -> tuple[str, ...]:
    """The names of a host list of at most ``limit`` names; ValueError names what is wrong
    (too many names, a malformed list)."""
    if hostlist_size(text) > limit:
        raise ValueError(f"more than {limit} names")
    try:
        return tuple(hostlist.expand_hostlist(text))
    except hostlist.BadHostlist as exc:
        raise ValueError(str(exc)) from None


def compress_hosts(names: Iterable[str]) -> str:
    """``node[01-03],gpu7``: Slurm's hostlist form of some node names, for messages."""
    return str(hostlist.collect_hostlist(list(names)))
