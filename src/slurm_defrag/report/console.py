"""The console the commands print their reports on: never cut when it is not a terminal.

Rich lays out for a terminal: a table wider than the screen gets its columns shrunk
(``free/GP…``), its cells wrapped, and a long line is broken. That is right on a terminal,
whose width is known; in a pipe or a file there is no screen, and rich assumes 80 columns
(or ``COLUMNS``), so ``slurm-defrag frag | less`` or a report saved to a file lost
headers and cut cells (issue #45). :class:`OutputConsole` prints each thing given to
:meth:`~OutputConsole.print` at its natural width when that is wider than the console
(``COLUMNS`` or 80 stays the least width, e.g. for what is laid out to the width), and
exactly like rich on a terminal.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.text import Text

WIDEST = 10_000
"""Columns a line may have in a pipe: more than any report needs, a bound for rich."""


class OutputConsole(Console):
    """A :class:`~rich.console.Console` that does not cut its output to a pipe or file."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if self.is_terminal or not objects or kwargs.get("width") is not None:
            super().print(*objects, **kwargs)
            return
        need = max(self._natural_width(o, kwargs) for o in objects)
        if need <= self.width:
            super().print(*objects, **kwargs)
            return
        saved = self._width
        self.width = min(need, WIDEST)
        try:
            super().print(*objects, **kwargs)
        finally:
            self._width = saved

    def _natural_width(self, obj: Any, kwargs: dict[str, Any]) -> int:
        """The columns ``obj`` takes when nothing constrains it (its longest line)."""
        if isinstance(obj, str):
            markup = kwargs.get("markup")
            obj = self.render_str(obj, markup=markup) if markup is not False else Text(obj)
        elif not hasattr(obj, "__rich_console__") and not hasattr(obj, "__rich__"):
            obj = Text(str(obj))
        options = self.options.update_width(WIDEST)
        return Measurement.get(self, options, obj).maximum


def output_console(**kwargs: Any) -> Console:
    """The console a command prints its report on (stdout unless ``stderr=True``)."""
    return OutputConsole(**kwargs)
