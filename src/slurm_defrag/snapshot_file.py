"""Reading and writing snapshot files, with errors a person can act on.

A bad file gives exactly one message naming the file, the JSON path and the problem, e.g.
``examples/x.json: nodes[3].gpu_count: Input should be greater than or equal to 0``.
The path ``-`` is standard input (``slurm-defrag snapshot --json | slurm-defrag frag -s -``),
named ``<stdin>`` in messages.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from slurm_defrag.config_files import one_line, value_error_text
from slurm_defrag.domain.cluster import SCHEMA_VERSION, ClusterSnapshot
from slurm_defrag.errors import InputError


def _json_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


# A validator's message may start with the path it is about, relative to where it runs:
# "jobs[2].gpus.node01: GPU 3 also held by job 101" from the snapshot's cross-check.
_MSG_PATH = re.compile(r"^(?P<path>[A-Za-z_][\w]*(?:\[\d+\]|\.[\w-]+)*): (?P<rest>.+)$", re.S)


def _locate(loc: tuple[int | str, ...], msg: str) -> str:
    """``path: message``, joining a path at the head of ``msg`` onto the error's location."""
    path = _json_path(loc) if loc else ""
    m = _MSG_PATH.match(msg)
    if m is not None:
        sub = m["path"]
        path = f"{path}.{sub}" if path else sub
        msg = m["rest"]
    return f"{path or '(top level)'}: {msg}"


def format_validation_error(source: Path | str, exc: ValidationError) -> str:
    """One line for the first error, plus a count of the others (all listed after)."""
    errors = exc.errors(include_url=False)
    lines = []
    for err in errors:
        loc = tuple(p for p in err["loc"] if p not in ("function-after", "function-before"))
        msg = " ".join(err["msg"].removeprefix("Value error, ").split())  # one line
        # one_line: keys come from the file (a key may hold a line break).
        lines.append(one_line(f"{source}: {_locate(loc, msg)}"))
    if len(lines) > 1:
        return lines[0] + f" (and {len(lines) - 1} more: " + "; ".join(lines[1:5]) + ")"
    return lines[0]


STDIN_NAME = "<stdin>"


def is_stdin(path: Path | str) -> bool:
    """``-``: read standard input instead of a file."""
    return str(path) == "-"


def shown(path: Path | str) -> str:
    """How messages name ``path``."""
    return STDIN_NAME if is_stdin(path) else str(path)


def _read_text(path: Path) -> str:
    if is_stdin(path):
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:
            raise InputError(f"{STDIN_NAME}: no standard input to read")
        return bytes(stream.read()).decode("utf-8")
    return path.read_text(encoding="utf-8")


def read_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` (``-``: standard input); any problem is one line."""
    name = shown(path)
    try:
        text = _read_text(path)
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except OSError as exc:
        raise InputError(f"{name}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{name}: not UTF-8 text (byte {exc.start}): {exc.reason}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{name}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except ValueError as exc:  # an integer beyond Python's int string limit (4300 digits)
        raise InputError(f"{name}: not valid JSON: {value_error_text(exc)}") from None
    except RecursionError:
        raise InputError(f"{name}: not valid JSON: nested too deeply") from None
    if not isinstance(data, dict):
        raise InputError(f"{name}: (top level): expected a JSON object")
    return data


def parse_snapshot(data: dict[str, Any], source: Path | str = "<snapshot>") -> ClusterSnapshot:
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        newer = isinstance(version, int) and version > SCHEMA_VERSION
        raise InputError(
            f"{source}: schema_version: expected {SCHEMA_VERSION}, found "
            + (
                one_line(repr(version))[:40]
                if isinstance(version, int | str | float | None)
                else f"a {type(version).__name__}"
            )
            + (" (written by a newer slurm-defrag?)" if newer else "")
        )
    try:
        return ClusterSnapshot.model_validate(data)
    except ValidationError as exc:
        raise InputError(format_validation_error(source, exc)) from None


def load_snapshot(path: Path) -> ClusterSnapshot:
    """The snapshot in ``path`` (``-``: standard input)."""
    return parse_snapshot(read_json(path), shown(path))


def dump_snapshot(snapshot: ClusterSnapshot, indent: int | None = 1) -> str:
    return snapshot.model_dump_json(indent=indent)


def save_snapshot(snapshot: ClusterSnapshot, path: Path) -> None:
    path.write_text(dump_snapshot(snapshot) + "\n", encoding="utf-8")
