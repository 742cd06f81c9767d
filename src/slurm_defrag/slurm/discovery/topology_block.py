"""Multi-node NVLink domains from Slurm's ``topology/block`` plugin.

Sites with multi-node NVLink racks (GB200 NVL72) describe each rack to Slurm as a block:
``TopologyPlugin=topology/block`` in slurm.conf and ``BlockName=b1 Nodes=node[01-18]``
(+ ``BlockSizes=``) in topology.conf. ``scontrol show topology`` then prints (24.11.5,
recorded in tests/fixtures/topology-block-24.11)::

    BlockName=b1 BlockIndex=0 Nodes=node[01-02] BlockSize=2
    BlockName=b2 BlockIndex=1 Nodes=node[03-04] BlockSize=2
    AggregatedBlock=b[1-2] BlockIndex=2 Nodes=node[01-04] BlockSize=4

One ``BlockName=`` line is one NVLink domain: its ``Nodes=`` are the nodes (``BlockSize=``
is the plugin's *base* block size, not the node count: a 3-node block with
``BlockSizes=1`` prints ``BlockSize=1``). ``AggregatedBlock=`` lines are the larger
``BlockSizes`` the scheduler may combine base blocks into; they span several NVLink
fabrics, so they are no domain and are skipped.

Other plugins print other lines: ``topology/tree`` one ``SwitchName=`` line per switch (a
network switch, never an NVLink domain), ``topology/default`` nothing. Both give no
domains (the cli backend only runs the command when ``TopologyPlugin=topology/block``,
see :func:`topology_plugin`, but a switch is never taken for a rack either way). Any other
line is an error naming it.

slurmrestd (v0.0.40-42) and ``scontrol show nodes --json``/``sinfo --json`` of 24.11 do
not expose blocks (recorded: no block field on nodes, no topology endpoint), nor do the
node/job/partition/reservation objects the pyslurm backend reads,
and 22.05 has no topology/block. For the rest and pyslurm backends the ``topology_conf``
setting names the topology.conf to read the blocks from instead
(:func:`topology_conf_domains`); when set it is the source for every backend.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from slurm_defrag.domain.cluster import NvlinkDomain
from slurm_defrag.errors import InputError
from slurm_defrag.slurm.failures import SlurmParseError
from slurm_defrag.slurm.parse.mapping import NULLS, expand_nodes, parse_error, show

WHERE = "scontrol show topology"

BLOCK_PLUGIN = "topology/block"

BLOCK_SINCE = (23, 11)
"""First Slurm release with topology/block (older ones are not asked)."""

_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]*", re.ASCII)
# Block names come from topology.conf (the admin's); the same characters as node names.
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}", re.ASCII)
_INT = re.compile(r"[0-9]{1,9}", re.ASCII)
# Lines that are no NVLink domain: aggregated blocks, and topology/tree's switches.
_SKIPPED_KEYS = frozenset({"AggregatedBlock", "SwitchName"})


def topology_plugin(config_text: str) -> str | None:
    """``TopologyPlugin`` from ``scontrol show config`` text (None if not listed)."""
    for line in config_text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "TopologyPlugin":
            return value.strip() or None
    return None


def _fields(line: str, lineno: int, where: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for token in line.split():
        key, sep, value = token.partition("=")
        if not sep or not _KEY.fullmatch(key):
            raise _error(where, lineno, f"{show(token)} is not Key=Value")
        if key in seen:
            raise _error(where, lineno, f"{key}= given twice")
        seen.add(key)
        out.append((key, value))
    return out


Rows = Iterable[tuple[int, list[tuple[str, str]]]]
"""(line number, [(Key, value), ...]) per non-blank line, keys spelt as scontrol does."""


def nvlink_domains(text: str, where: str = WHERE) -> tuple[NvlinkDomain, ...]:
    """The ``BlockName=`` lines of ``scontrol show topology`` as NVLink domains.

    Empty output (topology/default) and tree switches give none; aggregated blocks are
    skipped. Any other line, a block without nodes, a name given twice or a node in two
    blocks raise one :class:`SlurmParseError` naming the line.
    """
    rows = (
        (lineno, _fields(line, lineno, where))
        for lineno, line in enumerate(text.splitlines(), start=1)
        if line.strip()
    )
    return _domains(rows, where)


# topology.conf keys (Slurm reads them in any case) -> the spelling scontrol prints
_CONF_KEYS = {k.lower(): k for k in ("BlockName", "Nodes", "BlockSizes", "SwitchName")}
_CONF_SKIPPED = frozenset({"BlockSizes", "SwitchName"})


def topology_conf_domains(text: str, where: str) -> tuple[NvlinkDomain, ...]:
    """``BlockName=`` lines of a topology.conf (``topology_conf`` setting) as domains.

    For backends that cannot ask Slurm (rest, pyslurm). ``#`` starts a comment;
    ``BlockSizes=`` and tree lines (``SwitchName=``) give no domain; other lines and
    keys are refused with one :class:`InputError` naming the line.
    """

    def rows() -> Rows:
        for lineno, raw in enumerate(text.splitlines(), start=1):
            line = raw.partition("#")[0]
            if not line.strip():
                continue
            fields = _fields(line, lineno, where)
            first = _CONF_KEYS.get(fields[0][0].lower())
            if first in _CONF_SKIPPED:
                continue
            if first != "BlockName":
                raise _error(where, lineno, f"unknown line {show(fields[0][0] + '=')}")
            out = []
            for key, value in fields:
                known = _CONF_KEYS.get(key.lower())
                if known not in ("BlockName", "Nodes"):
                    raise _error(where, lineno, f"unknown key {show(key + '=')} in a block line")
                out.append((known, value))
            yield lineno, out

    try:
        return _domains(rows(), where)
    except SlurmParseError as exc:
        raise InputError(str(exc)) from None


def _domains(rows: Rows, where: str) -> tuple[NvlinkDomain, ...]:
    domains: list[NvlinkDomain] = []
    names: dict[str, int] = {}
    owner: dict[str, tuple[str, int]] = {}
    for lineno, fields in rows:
        first, name = fields[0]
        if first in _SKIPPED_KEYS:
            continue
        if first != "BlockName":
            raise _error(where, lineno, f"unknown line {show(first + '=')}, expected BlockName=")
        if not _NAME.fullmatch(name):
            raise _error(where, lineno, f"BlockName: bad block name {show(name)}")
        if name in names:
            raise _error(where, lineno, f"block {name} listed twice (first on line {names[name]})")
        names[name] = lineno
        values = dict(fields)
        for key in ("BlockIndex", "BlockSize"):
            if key in values and not _INT.fullmatch(values[key]):
                raise _error(where, lineno, f"{key}: not a number: {show(values[key])}")
        raw = values.get("Nodes")
        if raw is None or raw in NULLS:
            raise _error(where, lineno, f"block {name} has no Nodes=")
        nodes = expand_nodes(raw, f"{where}: line {lineno}", "Nodes")
        for node in nodes:
            if node in owner:
                other, other_line = owner[node]
                raise _error(
                    where, lineno, f"node {node} in block {name} and in {other} (line {other_line})"
                )
            owner[node] = (name, lineno)
        domains.append(NvlinkDomain(name=name, nodes=tuple(nodes)))
    return tuple(domains)


def _error(where: str, lineno: int, problem: str) -> SlurmParseError:
    return parse_error(where, f"line {lineno}", problem)
