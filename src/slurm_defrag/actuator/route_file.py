"""The per-job route's file: what job_submit.lua routes by, rewritten every cycle.

The ``fgd-route`` levers (:mod:`slurm_defrag.planner.levers`) hand job_submit.lua the
cycle's free resources of every node (:func:`~slurm_defrag.planner.levers.route_table`).
slurmctld runs the script in its own process, so the table goes through a file on the
controller's local disk: written to a temporary file and renamed over the old one (the
script never sees half a file), with a first line that changes at every write (the
script re-reads the file when that line changed) and ``generated_at`` + ``valid_s``: a
route the service stopped refreshing (stopped, crashed, lease lost) is not used past
that time, so a crash never leaves jobs steered by a cluster long gone.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from slurm_defrag.actuator.lua_table import to_lua, write_atomically

log = logging.getLogger(__name__)

STAMP = "-- slurm-defrag route"
"""The first line starts with this; the rest (time, process, write count) changes with
every write."""


class RouteFile:
    """Writes the route for job_submit.lua at ``path``; :meth:`clear` stops routing."""

    def __init__(
        self, path: Path, valid_s: float, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.path = path
        self.valid_s = valid_s
        self.clock = clock
        self._writes = itertools.count(1)

    def write(self, entry: Mapping[str, object]) -> None:
        """This cycle's route (:func:`~slurm_defrag.planner.levers.route_table`)."""
        now = self.clock()
        body = {**entry, "generated_at": int(now), "valid_s": int(self.valid_s)}
        text = (
            f"{STAMP} {now:.6f} {os.getpid()} {next(self._writes)}\n"
            "-- Written by the slurm-defrag service every cycle for job_submit.lua; do not"
            " edit.\nreturn " + to_lua(body) + "\n"
        )
        write_atomically(self.path, text)

    def clear(self) -> bool:
        """Remove the file (job_submit.lua stops routing at its next look); True if it
        was there."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        log.info("packing: route file %s removed: job_submit.lua stops routing", self.path)
        return True
