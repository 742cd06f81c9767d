"""Reading the files an admin writes (service settings, policy), failing closed.

Every problem becomes one :class:`~slurm_defrag.errors.InputError` line naming the file:
a path that does not exist, is not a regular file, is too large, is not UTF-8, is not
valid TOML/YAML or nests too deeply. Also the path type every setting uses, which refuses
an empty string (``Path("")`` is ``.``: a ``kill_switch_file = ""`` would always exist).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator

from slurm_defrag.errors import InputError

MAX_CONFIG_BYTES = 1024 * 1024
"""Settings and policy files are a few kB; a bigger one is a mistake (or an attack on memory)."""


def _not_empty(value: object) -> object:
    if isinstance(value, str | bytes) and not value.strip():
        raise ValueError("empty path: give a path, or leave the key out for the default")
    return value


NonEmptyPath = Annotated[Path, BeforeValidator(_not_empty)]
"""A path setting; ``""`` is refused instead of becoming ``.`` (the current directory)."""


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters escaped, for one-line errors."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def value_error_text(exc: ValueError) -> str:
    """A parser's ValueError in one short line (Python refuses ints of over 4300 digits)."""
    text = one_line(str(exc))
    if text.startswith("Exceeds the limit"):
        return "an integer with too many digits"
    return text[:200]


def read_text(path: Path, origin: str = "") -> str:
    """The UTF-8 text of ``path``; ``origin`` (e.g. ``SLURM_DEFRAG_CONFIG``) says in errors
    where the path came from."""
    shown = f"{path} (from {origin})" if origin else str(path)
    try:
        with path.open("rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise InputError(f"{shown}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{shown}: is a directory, not a file") from None
    except OSError as exc:
        raise InputError(f"{shown}: cannot read: {exc.strerror}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise InputError(f"{shown}: larger than {MAX_CONFIG_BYTES // 1024} KiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{shown}: not UTF-8 text (byte {exc.start}): {exc.reason}") from None


def parse_toml(text: str, source: Path | str) -> dict[str, Any]:
    """Parse TOML text; errors (including nesting too deep for the parser) as InputError."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{source}: not valid TOML: {one_line(str(exc))}") from None
    except ValueError as exc:  # an integer beyond Python's int string limit (4300 digits)
        raise InputError(f"{source}: not valid TOML: {value_error_text(exc)}") from None
    except RecursionError:
        raise InputError(f"{source}: not valid TOML: nested too deeply") from None
