"""Reads of the controller itself, for ``slurm-defrag doctor``: configuration, files, time.

Everything goes through the cli backend's runner (argv lists, the settings' command
prefix and timeout, failures mapped to the typed Slurm errors), so ``doctor`` reaches the
controller exactly the way the service's cli backend does — ``docker exec CONTAINER`` or
``sudo -n`` included. Each function reads one thing and raises
:class:`~slurm_defrag.slurm.failures.SlurmParseError` with one line when the answer is not
what Slurm prints; nothing here interprets the result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from slurm_defrag.slurm.cli_backend import CliSlurm
from slurm_defrag.slurm.failures import SlurmParseError

MAX_FILE_BYTES = 1_000_000
"""A hook file larger than this is not ours; it is not compared (and not kept in memory)."""

_ITEM = re.compile(r"^([A-Za-z]\w*)\[\d{1,3}\]$")
_NULL = frozenset({"", "(null)", "none"})
_ID = re.compile(r"uid=(\d+)\(([^()\s]+)\)")
_SDIAG_AT = re.compile(r"^sdiag output at .*\((\d{1,12})\)\s*$", re.MULTILINE)
_USER = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.@-]{0,63}$")
_LEVELS = ("none", "operator", "administrator")


def show_config(cli: CliSlurm) -> dict[str, str]:
    """``scontrol show config`` as ``{key: value}``; ``(null)`` values become ``""``.

    24.11 prints list settings one line per item (``EpilogSlurmctld[0] = /etc/...``,
    absent when empty); those are joined with commas under the plain key, the way 22.05
    prints them (``EpilogSlurmctld = /etc/...``).
    """
    conf = parse_show_config(cli.run("scontrol", "show", "config"))
    if "SLURM_VERSION" not in conf:
        raise SlurmParseError("scontrol show config: no SLURM_VERSION line")
    return conf


def parse_show_config(out: str) -> dict[str, str]:
    """The text of ``scontrol show config`` as :func:`show_config` reads it (also what
    ``plugins render --priority-config`` is given)."""
    conf: dict[str, str] = {}
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key or " " in key:
            continue
        value = value.strip()
        value = "" if value.lower() in _NULL else value
        item = _ITEM.match(key)
        if item is not None:
            key = item[1]
            if conf.get(key) and value:
                value = f"{conf[key]},{value}"
            elif not value:
                value = conf.get(key, "")
        conf[key] = value
    return conf


def release(version: str, what: str) -> tuple[int, int]:
    """(major, minor) of ``22.05.8`` (a release string from Slurm)."""
    match = re.match(r"\s*(\d{1,4})\.(\d{1,2})", version)
    if match is None:
        raise SlurmParseError(f"{what}: no release in {version[:40]!r}")
    return int(match[1]), int(match[2])


def read_file(cli: CliSlurm, path: str) -> str:
    """The text of ``path`` on the controller (``cat``), at most :data:`MAX_FILE_BYTES`.

    A missing or unreadable file raises the rejected error ``cat`` reports.
    """
    if not path.startswith("/") or "\n" in path or "\x00" in path:
        raise SlurmParseError(f"not an absolute file path: {path[:80]!r}")
    out = cli.run("head", "-c", str(MAX_FILE_BYTES + 1), "--", path)
    if len(out.encode("utf-8", "surrogateescape")) > MAX_FILE_BYTES:
        raise SlurmParseError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
    return out


@dataclass(frozen=True)
class Identity:
    uid: int
    user: str


def identity(cli: CliSlurm) -> Identity:
    """Who the Slurm commands run as (``id`` through the same prefix)."""
    out = cli.run("id")
    match = _ID.search(out)
    if match is None:
        raise SlurmParseError(f"id: no uid=N(name) in {out.strip()[:80]!r}")
    return Identity(int(match[1]), match[2])


def admin_level(cli: CliSlurm, user: str) -> str | None:
    """The user's ``AdminLevel`` in the accounting database (``none``, ``operator`` or
    ``administrator``), None when the user has no record there."""
    if not _USER.match(user):
        raise SlurmParseError(f"not a user name: {user[:64]!r}")
    out = cli.run("sacctmgr", "-n", "-P", "show", "user", user, "format=AdminLevel")
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    if not lines:
        return None
    level = lines[0].lower()
    if len(lines) != 1 or level not in _LEVELS:
        raise SlurmParseError(
            f"sacctmgr show user {user}: AdminLevel {lines[0][:40]!r} is not one of "
            "None, Operator, Administrator"
        )
    return level


def server_time(cli: CliSlurm) -> datetime:
    """slurmctld's clock: the time ``sdiag`` says it answered at (epoch seconds)."""
    out = cli.run("sdiag")
    match = _SDIAG_AT.search(out)
    if match is None:
        raise SlurmParseError("sdiag: no 'sdiag output at ... (EPOCH)' line")
    try:
        return datetime.fromtimestamp(int(match[1]), UTC)
    except (OverflowError, OSError, ValueError):
        raise SlurmParseError(f"sdiag: time {match[1]} out of range") from None
