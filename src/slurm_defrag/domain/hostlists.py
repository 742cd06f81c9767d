"""Slurm host lists (``node[01-04,07]``) sized before they are expanded.

python-hostlist expands eagerly (100,000 names per range, any number of ranges), and host
lists come from files an admin wrote and from what users typed (``-w``, ``-x``): each is
sized first, so ``node[0-99999999]`` is refused instead of filling the memory.
"""

from __future__ import annotations

import re

import hostlist

from slurm_defrag.domain.gres import ascii_digits

MAX_HOSTS = 65_536
"""Largest host list expanded; the biggest Slurm clusters have about 10,000 nodes."""

_MAX_HOST_GROUPS = 8  # bracket groups in one host name: python-hostlist recurses per group


def hostlist_size(text: str) -> int:
    """How many names a host list expands to, at most (without expanding it).

    Raises ValueError when that is more than :data:`MAX_HOSTS`, or when a range bound is
    too long to be a node number. Malformed lists are left to python-hostlist to refuse.
    """
    total = 0
    for part in re.split(r",(?![^\[]*\])", text):
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


def expand_hosts(text: str, limit: int = MAX_HOSTS) -> tuple[str, ...]:
    """The names of a host list of at most ``limit`` names; ValueError names what is wrong
    (too many names, a malformed list)."""
    if hostlist_size(text) > limit:
        raise ValueError(f"more than {limit} names")
    try:
        return tuple(hostlist.expand_hostlist(text))
    except hostlist.BadHostlist as exc:
        raise ValueError(str(exc)) from None
