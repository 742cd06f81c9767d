"""Lua tables job_submit.lua reads: the serialiser and the atomic file write.

Two writers use it: ``slurm-defrag plugins render`` (defrag_nodes.lua, once per
configuration change) and the service's per-job route (the route file, every cycle).
slurmctld runs what these files hold as Lua inside its own process, so every string is
written as a literal of printable ASCII (:func:`lua_string`): nothing a node, partition or
path name contains can end a literal or a comment and become code.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

_LUA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LUA_KEYWORDS = frozenset(
    {
        "and",
        "break",
        "do",
        "else",
        "elseif",
        "end",
        "false",
        "for",
        "function",
        "goto",
        "if",
        "in",
        "local",
        "nil",
        "not",
        "or",
        "repeat",
        "return",
        "then",
        "true",
        "until",
        "while",
    }
)


def lua_string(s: str) -> str:
    """A Lua string literal; every byte outside printable ASCII is escaped as \\ddd.

    The result is printable ASCII only (no newline, no control byte, no ``]]``-sensitive
    long bracket), and means the same bytes in Lua 5.1 to 5.4: ``\\ddd`` is three decimal
    digits, always, so a digit after it cannot extend it.
    """
    out = ['"']
    for byte in s.encode("utf-8", "surrogateescape"):  # a non-UTF-8 path keeps its bytes
        ch = chr(byte)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 32 <= byte < 127:
            out.append(ch)
        else:
            out.append(f"\\{byte:03d}")
    out.append('"')
    return "".join(out)


def _lua_key(k: str) -> str:
    return k if _LUA_NAME.match(k) and k not in _LUA_KEYWORDS else f"[{lua_string(k)}]"


def to_lua(value: object, indent: int = 0) -> str:
    """Serialise JSON-like data (dict, list, str, int, finite float, bool) as a Lua
    expression.

    ``None`` values in a dict are left out (a missing key is nil in Lua). Short lists of
    scalars and small scalar-only dicts stay on one line so the file reads like a table.
    """
    pad, inner = "  " * indent, "  " * (indent + 1)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"cannot write {value} to Lua")
        return repr(value)  # "40.0", "1e-05": Lua numbers as written
    if isinstance(value, str):
        return lua_string(value)
    if isinstance(value, Mapping):
        items = [(str(k), v) for k, v in value.items() if v is not None]
        if not items:
            return "{}"
        if all(not isinstance(v, Mapping | list | tuple) for _, v in items) and len(items) <= 4:
            return "{ " + ", ".join(f"{_lua_key(k)} = {to_lua(v)}" for k, v in items) + " }"
        body = ",\n".join(f"{inner}{_lua_key(k)} = {to_lua(v, indent + 1)}" for k, v in items)
        return "{\n" + body + ",\n" + pad + "}"
    if isinstance(value, list | tuple):
        if not value:
            return "{}"
        if all(not isinstance(v, Mapping | list | tuple) for v in value):
            return "{ " + ", ".join(to_lua(v) for v in value) + " }"
        body = ",\n".join(inner + to_lua(v, indent + 1) for v in value)
        return "{\n" + body + ",\n" + pad + "}"
    raise TypeError(f"cannot write {type(value).__name__} to Lua")


def write_atomically(path: Path, text: str) -> None:
    """Write via a temporary file in the same directory and rename: slurmctld may read
    the table at any moment and must never see half a file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or Path("."))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
