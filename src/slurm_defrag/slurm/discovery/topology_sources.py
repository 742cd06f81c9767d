"""Where each node's NVLink topology comes from: Slurm never reports NVLinks.

Sources, first one that covers a node wins (docs/service.md, "Topology sources"):

1. ``gres.conf`` ``Links=`` rows: the ``gres_conf`` file, or when it is not set (cli
   backend) the ``gres.conf`` beside Slurm's own ``slurm.conf``, read through the adapter;
2. ``topology_map``: an admin's YAML/JSON file, hostlist -> built-in template or Links rows;
3. ``topology_dir``: one ``<node>.json`` per node written by a collector
   (``nvidia-smi topo -m``), format ``slurm-defrag-topology/1``;
4. ``topology_templates``: hostlist -> built-in template, from the settings.

A GPU node none of them covers keeps ``topology: null`` and is *unknown*: views say so and
the planner treats it as having no NVLink (it never targets it for an NVLink job), instead
of silently calling it PCIe.

What the admin names (``gres_conf``, ``topology_map``, ``topology_templates``) is config: a
bad file is one :class:`InputError` naming the file and the field, and the read stops.
What nodes report or Slurm's own config holds (the collector's files, the discovered
gres.conf) is data: a bad entry leaves those nodes unknown with a warning naming the file,
so one GPU fallen off the bus or one stray file in the collector's directory never stops
the read of the whole cluster.
"""

from __future__ import annotations

import json
import logging
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from slurm_defrag.domain.cluster import ClusterSnapshot, TopologySource
from slurm_defrag.domain.hostlists import compress_hosts
from slurm_defrag.domain.topology import BUILTIN_TOPOLOGIES, GpuTopology
from slurm_defrag.domain.unknown_topology import unknown_topology_line
from slurm_defrag.errors import InputError
from slurm_defrag.slurm.connection import SlurmSettings
from slurm_defrag.slurm.discovery.gres_conf import (
    LinksParseError,
    from_links_matrix,
    parse_gres_conf_links,
)
from slurm_defrag.slurm.parse.mapping import expand_config_hosts

COLLECTOR_FORMAT = "slurm-defrag-topology/1"
MAX_FILE_BYTES = 4 << 20
"""Refuse larger map / collector files: a topology description is a few kB."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Found:
    """One node's topology and the source that gave it; ``data``: reported by the node or
    Slurm's own config (a GPU count that disagrees with Slurm leaves the node unknown with
    a warning), not named by the admin (then it is a config error)."""

    topology: GpuTopology
    source: TopologySource
    data: bool = False


@dataclass(frozen=True)
class GresConfText:
    """A gres.conf read by a backend (``where`` names it in errors: path or discovery)."""

    where: str
    text: str


def resolve(settings: SlurmSettings, discovered: GresConfText | None = None) -> dict[str, Found]:
    """node -> topology and source, by the precedence above.

    ``discovered`` is the gres.conf the backend found through Slurm's config location; it
    is only used when the ``gres_conf`` setting is not set.
    """
    layers: list[tuple[TopologySource, Mapping[str, GpuTopology], bool]] = []
    if settings.gres_conf is not None:
        layers.append(("gres.conf", read_gres_conf(settings.gres_conf), False))
    elif discovered is not None:
        layers.append(("gres.conf", discovered_topologies(discovered), True))
    if settings.topology_map is not None:
        layers.append(("map", read_topology_map(settings.topology_map), False))
    if settings.topology_dir is not None:
        layers.append(("collector", read_topology_dir(settings.topology_dir), True))
    layers.append(("template", template_topologies(settings.topology_templates), False))
    out: dict[str, Found] = {}
    for source, topologies, data in layers:
        for node, topo in topologies.items():
            out.setdefault(node, Found(topo, source, data))
    return out


def node_topologies(settings: SlurmSettings) -> dict[str, GpuTopology]:
    """node -> topology from the explicit settings alone (``plugins render``)."""
    return {node: found.topology for node, found in resolve(settings).items()}


# -- the readers -------------------------------------------------------------------------


def discovered_topologies(conf: GresConfText) -> dict[str, GpuTopology]:
    """The discovered gres.conf's Links=; a bad one is no source (with a warning)."""
    try:
        return gres_conf_topologies(conf)
    except InputError as exc:
        log.warning("topology: %s; its nodes stay unknown", exc)
        return {}


def gres_conf_topologies(conf: GresConfText) -> dict[str, GpuTopology]:
    try:
        return parse_gres_conf_links(conf.text)
    except (LinksParseError, ValueError) as exc:
        raise InputError(f"{conf.where}: Links=: {exc}") from None


def read_gres_conf(path: Path) -> dict[str, GpuTopology]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read gres.conf: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: gres.conf is not UTF-8 text (byte {exc.start})") from None
    return gres_conf_topologies(GresConfText(str(path), text))


def template_topologies(templates: Mapping[str, str]) -> dict[str, GpuTopology]:
    out: dict[str, GpuTopology] = {}
    for pattern, template in templates.items():
        for name in expand_config_hosts(pattern, "topology_templates"):
            out[name] = BUILTIN_TOPOLOGIES[template]
    return out


def read_topology_map(path: Path) -> dict[str, GpuTopology]:
    """``{"nodes": {HOSTLIST: {"template": NAME} | {"links": [[-1, 12, ...], ...]}}}``.

    YAML or JSON (JSON is YAML). ``links`` rows follow gres.conf ``Links=``: -1 the GPU
    itself, 0 no NVLink, >0 the NVLink count. A node named by two entries is an error.
    """
    data = _load(path, yaml_ok=True)
    if not isinstance(data, dict) or set(data) != {"nodes"} or not isinstance(data["nodes"], dict):
        raise InputError(f"{path}: expected one key 'nodes' mapping hostlists to entries")
    out: dict[str, GpuTopology] = {}
    for pattern, entry in data["nodes"].items():
        field = f"nodes.{str(pattern)[:80]}"
        topo = _map_entry(path, field, entry)
        for node in _hosts(path, field, pattern):
            if node in out:
                raise InputError(f"{path}: {field}: node {node} is already named by an entry")
            out[node] = topo
    return out


def _map_entry(path: Path, field: str, entry: object) -> GpuTopology:
    if not isinstance(entry, dict) or len(entry) != 1 or not {"template", "links"} & set(entry):
        raise InputError(f"{path}: {field}: expected {{template: NAME}} or {{links: ROWS}}")
    if "template" in entry:
        name = entry["template"]
        if not isinstance(name, str) or name not in BUILTIN_TOPOLOGIES:
            raise InputError(
                f"{path}: {field}.template: unknown template {str(name)[:80]!r}; built-in "
                "templates are: " + ", ".join(sorted(BUILTIN_TOPOLOGIES))
            )
        return BUILTIN_TOPOLOGIES[name]
    return _links(path, f"{field}.links", entry["links"])


def read_topology_dir(directory: Path) -> dict[str, GpuTopology]:
    """One ``<node>.json`` per node, as the collector writes it (other files are ignored)."""
    try:
        files = sorted(p for p in directory.iterdir() if p.suffix == ".json")
    except OSError as exc:
        raise InputError(f"{directory}: cannot read topology_dir: {exc.strerror}") from None
    out: dict[str, GpuTopology] = {}
    for path in files:
        try:
            if not stat.S_ISREG(path.stat().st_mode):
                # a FIFO would block the read forever, a device worse
                raise InputError(f"{path}: not a regular file")
            node, topo = read_collector_file(path)
        except OSError as exc:
            log.warning("topology: %s: cannot read: %s; skipped", path, exc.strerror)
            continue
        except InputError as exc:
            log.warning("topology: %s; skipped, that node stays unknown", exc)
            continue
        out[node] = topo
    return out


def read_collector_file(path: Path) -> tuple[str, GpuTopology]:
    """(node, topology) from one collector file; the file name must be ``<node>.json``."""
    data = _load(path, yaml_ok=False)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    if data.get("format") != COLLECTOR_FORMAT:
        raise InputError(f"{path}: format: expected {COLLECTOR_FORMAT!r}")
    node = data.get("node")
    if not isinstance(node, str) or node != path.stem:
        raise InputError(f"{path}: node: must be the file's name without .json ({path.stem!r})")
    gpus = data.get("gpus")
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
        raise InputError(f"{path}: gpus: expected a positive integer")
    topo = _links(path, "links", data.get("links"))
    if topo.gpu_count != gpus:
        raise InputError(f"{path}: links: {topo.gpu_count} rows for gpus={gpus}")
    return node, topo


# -- helpers ------------------------------------------------------------------------------


def _load(path: Path, *, yaml_ok: bool) -> Any:
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise InputError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        if yaml_ok:
            return yaml.safe_load(text)
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise InputError(f"{path}: not YAML or JSON{where}") from None
    except (ValueError, RecursionError):
        raise InputError(f"{path}: not JSON (number too long or nested too deep)") from None


def _links(path: Path, field: str, rows: object) -> GpuTopology:
    if not isinstance(rows, list):
        raise InputError(f"{path}: {field}: expected a list of rows (one per GPU)")
    try:
        return from_links_matrix(rows)
    except LinksParseError as exc:
        raise InputError(f"{path}: {field}: {exc}") from None


def _hosts(path: Path, field: str, pattern: object) -> list[str]:
    if not isinstance(pattern, str):
        raise InputError(f"{path}: {field}: a node hostlist must be a string")
    return expand_config_hosts(pattern, f"{path}: {field}")  # sized, one InputError line


# -- what is known and what is not (frag, metrics, web, doctor) ----------------------------


def unknown_topology_warning(snapshot: ClusterSnapshot) -> str | None:
    """One line naming the GPU nodes of unknown topology and the fix, or None."""
    return unknown_topology_line(snapshot.unknown_topology_nodes)


def topology_report(snapshot: ClusterSnapshot) -> dict[str, str]:
    """Source -> compressed hostlist of the GPU nodes it covered (``unknown``: none did).

    For ``doctor``: which nodes have unknown topology, and where the others' came from.
    """
    return {src: compress_hosts(nodes) for src, nodes in snapshot.topology_sources().items()}
