"""Durations as users write them (``90m``, ``12h``, ``7d``, ``2w``), for the CLI and the web.

A leaf module (it imports only :mod:`slurm_defrag.errors`) so that ``history --since`` and
the web page's ``?since=`` read durations by one rule without the web importing the CLI.
"""

from __future__ import annotations

import re

from slurm_defrag.errors import InputError

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
# ASCII digits only: \d alone also matches other scripts' digits ("٣d"); bounded length.
_DURATION = re.compile(r"^\s*([0-9]{1,12}(?:\.[0-9]{1,12})?)\s*([smhdw])\s*$", re.ASCII)

MAX_DURATION_DAYS = 3660
"""Ten years and a bit: far more than any retention, and ``now - since`` stays a date."""


def parse_duration(text: str) -> float:
    """``90m``, ``12h``, ``7d``, ``2w`` -> seconds."""
    m = _DURATION.match(text)
    if m is None or float(m[1]) <= 0:
        raise InputError(f"--since: {text[:40]!r} is not a duration like 30m, 12h, 7d or 2w")
    seconds = float(m[1]) * _UNITS[m[2]]
    if seconds > MAX_DURATION_DAYS * 86400:
        raise InputError(f"--since: {text!r} is longer than {MAX_DURATION_DAYS} days")
    return seconds
