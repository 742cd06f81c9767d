"""A YAML loader for policy files that refuses aliases (``*name``).

``yaml.safe_load`` builds only plain data, but it still expands aliases: nine levels of
ten aliases each ("billion laughs") make 10^9 list items from a 1 kB file, which hangs
the process and exhausts memory. A policy never needs them (nor ``<<: *merge`` keys,
which are aliases too), so the composer rejects the first one before anything is built.
It also stops at :data:`MAX_DEPTH` levels of nesting: 3,000 open brackets took seconds to
reach Python's recursion limit.
"""

from __future__ import annotations

import yaml
from yaml.composer import ComposerError
from yaml.events import AliasEvent
from yaml.nodes import Node

MAX_DEPTH = 64
"""Nesting levels a policy may use (it needs four)."""


class NoAliasSafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that raises :class:`ComposerError` at the first alias, or past
    :data:`MAX_DEPTH` levels of nesting."""

    _depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self.check_event(AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise ComposerError(
                None, None, "aliases (*name) are not allowed in a policy file", event.start_mark
            )
        if self._depth >= MAX_DEPTH:
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise ComposerError(
                None, None, f"nested deeper than {MAX_DEPTH} levels", event.start_mark
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
