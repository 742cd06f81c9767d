"""The per-job route's file: what job_submit.lua routes by, rewritten every cycle.

The ``fgd-route`` levers (:mod:`slurm_defrag.packing.node_levers`) hand job_submit.lua the
cycle's free resources of every node (:func:`~slurm_defrag.packing.node_levers.route_table`).
slurmctld runs the script in its own process, so the table goes through a file on the
controller's local disk: written to a temporary file and renamed over the old one (the
script never sees half a file), with a first line that changes at every write (the
script re-reads the file when that line changed) and ``generated_at`` + ``valid_s``: a
route the service stopped refreshing (stopped, crashed, lease lost) is not used past
that time, so a crash never leaves jobs steered by a cluster long gone.

The file is data, never code (format 2; format 1 was a Lua table the script ran in a
sandbox that bounded neither memory nor time). One record per line, fields separated by
one space, lists by commas; job_submit.lua reads it with anchored patterns that do not
backtrack, after checking its size (at most :data:`MAX_BYTES`, lines of at most
:data:`MAX_LINE`, at most :data:`MAX_LINES` of them)::

    -- slurm-defrag route <time> <pid> <write count>
    -- Written by the slurm-defrag service every cycle for job_submit.lua; do not edit.
    route 2 <generated_at> <valid_s> <step> <shards_per_gpu> <score 0|1>
    mix <cpus> <gpus> <milli> <weight> <models>
    node <feature> <model> <cpus> <mem> <idle 0|1> <rank> <no_shards 0|1> <free> <partitions>
    end <mix lines> <node lines>

``<models>``, ``<partitions>``: ``*`` not given (any model; the node is not filtered by
partition), ``-`` the empty list, else names separated by commas; ``<model>`` ``-``: none;
``<free>`` ``-``: no GPU. Names are printable ASCII without spaces and commas (and not
``-`` or ``*``), features ``[A-Za-z0-9_]``; numbers finite decimals. The ``end`` line
counts the records, so a file cut short is refused. slurm-plugins/README.md, "The route
file", is the reader's side; both must be upgraded together (either refuses the other's
format by name, and routing waits: no job is refused on its account).
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from slurm_defrag.actuator.lua_table import write_atomically

log = logging.getLogger(__name__)

STAMP = "-- slurm-defrag route"
"""The first line starts with this; the rest (time, process, write count) changes with
every write."""
FORMAT = 2
"""The format version, the second field of the ``route`` line."""
MAX_BYTES = 4 * 1024 * 1024
"""job_submit.lua refuses a larger file before reading it (a 4,000-node file is ~0.4 MB)."""
MAX_LINE = 65536
"""... and a file with a longer line ..."""
MAX_LINES = 32768
"""... or more lines."""

_NAME = re.compile(r"[\x21-\x2b\x2d-\x7e]{1,255}")
"""Printable ASCII without space and comma (job_submit.lua's ``route_name``)."""
_FEATURE = re.compile(r"[A-Za-z0-9_]{1,255}")
_MIX_KEYS = frozenset({"cpus", "gpus", "milli", "weight", "models"})
_NODE_KEYS = frozenset(
    {"feature", "model", "free", "cpus", "mem", "idle", "rank", "partitions", "no_shards"}
)
_ROUTE_KEYS = frozenset({"score", "step", "shards_per_gpu", "mix", "nodes"})


def _number(value: object, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"route file: {what}: not a number ({value!r})")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"route file: {what}: not finite ({value!r})")
        return repr(value)
    return str(value)


def _flag(value: object, what: str) -> str:
    if not isinstance(value, bool):
        raise ValueError(f"route file: {what}: not true/false ({value!r})")
    return "1" if value else "0"


def _name(value: object, what: str) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value) or value in ("-", "*"):
        raise ValueError(
            f"route file: {what}: {value!r} is not a name it can hold"
            " (printable ASCII without spaces or commas)"
        )
    return value


def _names(value: object, what: str) -> str:
    """``*`` for None (not given), ``-`` for the empty list, else comma-separated names."""
    if value is None:
        return "*"
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise ValueError(f"route file: {what}: not a list ({value!r})")
    return ",".join(_name(v, what) for v in value) or "-"


def _check_keys(entry: Mapping[str, object], allowed: frozenset[str], what: str) -> None:
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise ValueError(f"route file: {what}: keys the format has no place for: {unknown}")


def route_lines(entry: Mapping[str, object], *, generated_at: int, valid_s: int) -> list[str]:
    """The records of the route ``entry`` (:func:`~slurm_defrag.packing.node_levers.route_table`)
    in format :data:`FORMAT`, without the stamp; ValueError for a value the format cannot
    hold (job_submit.lua would refuse the file)."""
    _check_keys(entry, _ROUTE_KEYS, "route")
    mix = entry.get("mix")
    nodes = entry.get("nodes")
    if not isinstance(mix, Sequence) or not isinstance(nodes, Sequence):
        raise ValueError("route file: mix and nodes must be lists")
    lines = [
        " ".join(
            (
                "route",
                str(FORMAT),
                _number(generated_at, "generated_at"),
                _number(valid_s, "valid_s"),
                _number(entry.get("step"), "step"),
                _number(entry.get("shards_per_gpu"), "shards_per_gpu"),
                _flag(bool(entry.get("score", False)), "score"),
            )
        )
    ]
    for i, t in enumerate(mix):
        if not isinstance(t, Mapping):
            raise ValueError(f"route file: mix[{i}]: not a table")
        _check_keys(t, _MIX_KEYS, f"mix[{i}]")
        lines.append(
            " ".join(
                (
                    "mix",
                    *(_number(t.get(k), f"mix[{i}].{k}") for k in ("cpus", "gpus", "milli")),
                    _number(t.get("weight"), f"mix[{i}].weight"),
                    _names(t.get("models"), f"mix[{i}].models"),
                )
            )
        )
    for i, n in enumerate(nodes):
        if not isinstance(n, Mapping):
            raise ValueError(f"route file: nodes[{i}]: not a table")
        _check_keys(n, _NODE_KEYS, f"nodes[{i}]")
        feature = n.get("feature")
        if not isinstance(feature, str) or not _FEATURE.fullmatch(feature):
            raise ValueError(f"route file: nodes[{i}].feature: {feature!r} is not [A-Za-z0-9_]")
        model = n.get("model") or ""
        free = n.get("free")
        if not isinstance(free, Sequence):
            raise ValueError(f"route file: nodes[{i}].free: not a list")
        lines.append(
            " ".join(
                (
                    "node",
                    feature,
                    _name(model, f"nodes[{i}].model") if model else "-",
                    _number(n.get("cpus"), f"nodes[{i}].cpus"),
                    _number(n.get("mem", -1), f"nodes[{i}].mem"),
                    _flag(n.get("idle", False), f"nodes[{i}].idle"),
                    _number(n.get("rank", i + 1), f"nodes[{i}].rank"),
                    _flag(n.get("no_shards", False), f"nodes[{i}].no_shards"),
                    ",".join(_number(f, f"nodes[{i}].free") for f in free) or "-",
                    _names(n.get("partitions"), f"nodes[{i}].partitions"),
                )
            )
        )
    lines.append(f"end {len(mix)} {len(nodes)}")
    return lines


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
        """This cycle's route (:func:`~slurm_defrag.packing.node_levers.route_table`)."""
        now = self.clock()
        lines = [
            f"{STAMP} {now:.6f} {os.getpid()} {next(self._writes)}",
            "-- Written by the slurm-defrag service every cycle for job_submit.lua; do not edit.",
            *route_lines(entry, generated_at=int(now), valid_s=int(self.valid_s)),
        ]
        if len(lines) > MAX_LINES:
            raise ValueError(
                f"route file: {len(lines)} lines, more than job_submit.lua reads ({MAX_LINES})"
            )
        longest = max(len(line) for line in lines)
        if longest > MAX_LINE:
            raise ValueError(
                f"route file: a line of {longest} bytes, more than job_submit.lua reads"
                f" ({MAX_LINE})"
            )
        text = "\n".join(lines) + "\n"
        if len(text) > MAX_BYTES:
            raise ValueError(
                f"route file: {len(text)} bytes, more than job_submit.lua reads ({MAX_BYTES})"
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
