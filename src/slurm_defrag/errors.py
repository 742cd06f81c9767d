"""Errors a user can act on. The CLI prints their message on one line and exits non-zero."""

from __future__ import annotations


class DefragError(Exception):
    """Base of every error that is shown to the user without a traceback."""

    exit_code = 2


class InputError(DefragError):
    """A file or option given by the user is malformed; the message names file and field."""
