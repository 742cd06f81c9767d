"""A YAML loader for policy files that refuses aliases (``*name``).

``yaml.safe_load`` builds only plain data, but it still expands aliases: nine levels of
ten aliases each ("billion laughs") make 10^9 list items from a 1 kB file, which hangs
the process and exhausts memory. A policy never needs them (nor ``<<: *merge`` keys,
which are aliases too), so the composer rejects the first one before anything is built.
"""

from __future__ import annotations

import yaml
from yaml.composer import ComposerError
from yaml.events import AliasEvent
from yaml.nodes import Node


class NoAliasSafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that raises :class:`ComposerError` at the first alias."""

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self.check_event(AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise ComposerError(
                None, None, "aliases (*name) are not allowed in a policy file", event.start_mark
            )
        return super().compose_node(parent, index)
