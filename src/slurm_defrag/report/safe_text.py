"""Slurm and user strings made safe for a terminal: one sanitizer for every renderer.

Job names, comments, users, node reasons, partition names and whatever Slurm prints back
are chosen by someone else. Printed as they are, they can drive the terminal (``ESC [``
sequences, OSC 52 writing the clipboard, BEL, ``\\r`` overwriting a line, C1 controls,
bidi overrides reordering what is read) or, as rich markup, restyle the output or raise
(``[/]`` is a MarkupError). So every such string goes through :func:`clean` (controls
become a visible ``\\x1b``-style escape) and reaches rich as a :class:`~rich.text.Text`
(never parsed as markup) via :func:`text`, or via :func:`markup` inside our own markup.
``--json`` output does not use this: it stays exact.
"""

from __future__ import annotations

from rich.markup import escape
from rich.text import Text

_BIDI_AND_SEPARATORS = (
    0x061C,
    0x200E,
    0x200F,
    0x2028,
    0x2029,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
)
_ESCAPES = {
    cp: (f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}")
    for cp in (*range(0x20), 0x7F, *range(0x80, 0xA0), *_BIDI_AND_SEPARATORS)
}


def clean(value: object) -> str:
    """``value`` as text with every control character (C0, DEL, C1), bidi control and line
    separator replaced by a visible escape, e.g. ``\\x1b``, ``\\n``, ``\\u202e``."""
    return str(value).translate(_ESCAPES)


def text(value: object, style: str = "") -> Text:
    """A table cell or line part: cleaned, and a :class:`Text`, so never read as markup."""
    return Text(clean(value), style=style)


def cells(*values: object) -> list[Text]:
    """``table.add_row(*cells(a, b, c))``."""
    return [v if isinstance(v, Text) else text(v) for v in values]


def lines(values: list[str]) -> Text:
    """Several strings as one multi-line cell (the newlines are ours, not the values')."""
    return Text("\n").join(text(v) for v in values)


def markup(value: object) -> str:
    """A value to put inside our own rich markup string: cleaned and markup-escaped."""
    return escape(clean(value))
