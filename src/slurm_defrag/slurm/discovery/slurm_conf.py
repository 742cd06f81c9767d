"""slurm.conf as slurm-defrag reads it: nodes (GPU GRES, features), partitions, a few options
(SlurmUser, SchedulerParameters, the ``Priority*`` settings).

Slurm's own file format, so it lives with the other Slurm adapters: ``plugins render`` reads
it to write the table ``job_submit.lua`` uses. Follows ``Include`` (relative to the file's
directory), ``NodeName=DEFAULT`` / ``PartitionName=DEFAULT``, ``Nodes=ALL`` and ``NodeSet=``.
Every name it hands on is checked to be a plain Slurm name: the names end up in Lua source.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from slurm_defrag.domain.gres import GresParseError, gpu_entries
from slurm_defrag.errors import InputError
from slurm_defrag.slurm.parse.mapping import expand_config_hosts

# What Slurm accepts in node, partition and GRES type names that we write into the table
# (its own parser allows little more; anything else is a typo or an attack on the Lua).
_NAME_RE = re.compile(r"[A-Za-z0-9_.+-]{1,256}", re.ASCII)


def check_name(kind: str, name: str, where: str) -> str:
    """``name`` if it is a plain Slurm name (letters, digits, ``. _ - +``), else InputError."""
    if not _NAME_RE.fullmatch(name):
        raise InputError(
            f"{where}: {kind} {name[:80]!r} is not a plain Slurm name (letters, digits, . _ - +)"
        )
    return name


@dataclass
class NodeConf:
    name: str
    gpus: int = 0
    models: dict[str, int] = field(default_factory=dict)
    features: tuple[str, ...] = ()
    cpus: int | None = None
    """``CPUs=``, else Boards x SocketsPerBoard (or Sockets) x CoresPerSocket x
    ThreadsPerCore; None when slurm.conf gives neither (slurmd reports it)."""
    memory_mb: int | None = None
    """``RealMemory=`` in MB; None when not given."""


@dataclass
class PartitionConf:
    name: str
    nodes: list[str]
    default: bool = False


@dataclass
class SlurmConf:
    nodes: dict[str, NodeConf] = field(default_factory=dict)
    partitions: dict[str, PartitionConf] = field(default_factory=dict)
    scheduler_parameters: tuple[str, ...] = ()
    slurm_user: str = "root"
    priority: dict[str, str] = field(default_factory=dict)
    """``Priority*`` settings (``PriorityType``, ``PriorityWeight*``), keys lower-cased:
    what the queue-order lever's cap is read from
    (:func:`slurm_defrag.packing.queue_order.read_range`)."""

    @property
    def default_partition(self) -> str | None:
        return next((p.name for p in self.partitions.values() if p.default), None)


def parse_gres_field(text: str, where: str) -> tuple[int, dict[str, int]]:
    """GPUs of a slurm.conf ``Gres=`` value: (total, {type: count}); untyped GPUs count only
    in the total. ``gpu:a100:8``, ``gpu:8``, ``gpu:a100:4,gpu:v100:4``, ``gpu:a100:no_consume:8``.
    Read with the one GRES grammar (:mod:`slurm_defrag.domain.gres`).
    """
    if text.strip().lower() == "none":
        return 0, {}
    try:
        entries = gpu_entries(text)
    except GresParseError as exc:
        raise InputError(f"{where}: cannot read Gres {text[:80]!r}: {exc}") from None
    models: dict[str, int] = {}
    for e in entries:
        if e.type is not None:
            models[e.type] = models.get(e.type, 0) + e.count
    return sum(e.count for e in entries), models


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """(line number, line) with comments removed and backslash continuations joined."""
    buf, start = "", 0
    for no, raw in enumerate(text.splitlines(), 1):
        line = re.sub(r"(?<!\\)#.*", "", raw).replace("\\#", "#").rstrip()
        if not buf:
            start = no
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        if buf.strip():
            yield start, buf.strip()
        buf = ""
    if buf.strip():
        yield start, buf.strip()


def _split_top_level(text: str) -> list[str]:
    """Split a node list on commas outside brackets: ``a[1-2],b,set1``."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [p.strip() for p in out if p.strip()]


def parse_slurm_conf(path: Path) -> SlurmConf:
    """Nodes (GPU GRES, features), partitions and SchedulerParameters of a slurm.conf.

    Follows ``Include`` lines (relative to the file's directory) and understands
    ``NodeName=DEFAULT`` / ``PartitionName=DEFAULT``, ``Nodes=ALL`` and ``NodeSet=``.
    """
    reader = _Reader()
    reader.read(path, 0)
    return reader.resolve()


def _attributes(words: list[str]) -> dict[str, str]:
    """``Key=Value`` words of one line, keys lower-cased (slurm.conf keys ignore case)."""
    out: dict[str, str] = {}
    for w in words:
        key, sep, value = w.partition("=")
        if sep:
            out[key.lower()] = value
    return out


def _count(attrs: dict[str, str], key: str, where: str) -> int | None:
    """A whole-number node attribute (None when absent), refused by name when it is not."""
    text = attrs.get(key)
    if text is None:
        return None
    if not text.isdigit() or len(text) > 9:
        raise InputError(f"{where}: node {key} {text[:40]!r} is not a whole number")
    return int(text)


def _node_cpus(attrs: dict[str, str], where: str) -> int | None:
    """CPUs of a node line as slurmctld counts them (``CPUs=`` wins)."""
    cpus = _count(attrs, "cpus", where)
    if cpus is not None:
        return cpus
    cores = _count(attrs, "corespersocket", where)
    if cores is None:
        return None
    sockets = _count(attrs, "socketsperboard", where) or _count(attrs, "sockets", where) or 1
    boards = _count(attrs, "boards", where) or 1
    threads = _count(attrs, "threadspercore", where) or 1
    return boards * sockets * cores * threads


@dataclass
class _Reader:
    """One pass over slurm.conf and its includes; partitions and node sets are resolved
    after it (:meth:`resolve`), once every node is known."""

    conf: SlurmConf = field(default_factory=SlurmConf)
    node_defaults: dict[str, str] = field(default_factory=dict)
    part_defaults: dict[str, str] = field(default_factory=dict)
    nodesets: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    """name -> (where, ``nodes`` | ``feature``, value)"""
    raw_parts: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    """(where, name, attributes) of each partition, in file order"""

    def read(self, p: Path, depth: int) -> None:
        if depth > 10:
            raise InputError(f"{p}: Include nested more than 10 deep")
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{p}: cannot read slurm.conf: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise InputError(f"{p}: not UTF-8 text (byte {exc.start})") from None
        for no, line in _logical_lines(text):
            where = f"{p}:{no}"
            if line.lower().startswith("include "):
                target = line.split(None, 1)[1].strip().strip('"')
                inc = Path(target) if os.path.isabs(target) else p.parent / target
                for one in sorted(inc.parent.glob(inc.name)) if "*" in inc.name else [inc]:
                    self.read(one, depth + 1)
                continue
            try:
                words = shlex.split(line)
            except ValueError as exc:
                raise InputError(f"{where}: {exc}") from None
            if words and "=" in words[0]:
                self.line(words[0].partition("=")[0].lower(), _attributes(words), where)

    def line(self, head: str, attrs: dict[str, str], where: str) -> None:
        conf = self.conf
        if head == "nodename":
            self.node(attrs, where)
        elif head == "partitionname":
            name = attrs["partitionname"]
            if name.upper() == "DEFAULT":
                self.part_defaults.update({k: v for k, v in attrs.items() if k != "partitionname"})
            else:
                self.raw_parts.append(
                    (
                        where,
                        check_name("partition name", name, where),
                        {**self.part_defaults, **attrs},
                    )
                )
        elif head == "nodeset":
            kind = "nodes" if "nodes" in attrs else "feature"
            self.nodesets[attrs["nodeset"]] = (where, kind, attrs.get(kind, ""))
        elif head == "slurmuser":
            conf.slurm_user = attrs["slurmuser"]
        elif head.startswith("priority") and head in attrs:
            conf.priority[head] = attrs[head]
        elif head == "schedulerparameters":
            conf.scheduler_parameters = tuple(
                p.strip() for p in attrs["schedulerparameters"].split(",") if p.strip()
            )

    def node(self, attrs: dict[str, str], where: str) -> None:
        name = attrs["nodename"]
        if name.upper() == "DEFAULT":
            self.node_defaults.update({k: v for k, v in attrs.items() if k != "nodename"})
            return
        merged = {**self.node_defaults, **attrs}
        gpus, models = parse_gres_field(merged.get("gres", ""), where)
        features = tuple(f for f in re.split(r"[,&|]", merged.get("features", "")) if f)
        for model in models:
            check_name("GPU type", model, where)
        cpus, memory = _node_cpus(merged, where), _count(merged, "realmemory", where)
        for host in expand_config_hosts(name, where):
            self.conf.nodes[check_name("node name", host, where)] = NodeConf(
                host, gpus, dict(models), features, cpus, memory
            )

    def resolve(self) -> SlurmConf:
        conf = self.conf
        sets: dict[str, list[str]] = {}
        for set_name, (where, kind, value) in self.nodesets.items():
            if kind == "nodes":
                sets[set_name] = expand_config_hosts(value, where)
            else:
                sets[set_name] = [n for n, nc in conf.nodes.items() if value in nc.features]
        for where, name, attrs in self.raw_parts:
            members: list[str] = []
            for item in _split_top_level(attrs.get("nodes", "")):
                if item.upper() == "ALL":
                    members.extend(conf.nodes)
                else:
                    members.extend(sets[item] if item in sets else expand_config_hosts(item, where))
            unknown = [n for n in members if n not in conf.nodes]
            if unknown:
                raise InputError(f"{where}: partition {name}: node {unknown[0]} is not defined")
            conf.partitions[name] = PartitionConf(
                name, list(dict.fromkeys(members)), attrs.get("default", "").upper() == "YES"
            )
        return conf
