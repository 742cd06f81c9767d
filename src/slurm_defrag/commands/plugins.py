"""``slurm-defrag plugins``: files for the Slurm-side hooks in ``slurm-plugins/``.

``slurm-defrag plugins render`` writes ``defrag_nodes.lua``, the table ``job_submit.lua``
reads when slurmctld loads it: per partition, the node types (GPU model, GPU count, NVLink
block sizes) and the plugin's switches. The hook itself stays static; the cluster-specific
knowledge is regenerated from the same sources the service uses (slurm.conf for nodes and
partitions, gres.conf ``Links=`` and the service's topology templates for NVLink).

Table format (``version = 1``)::

    return {
      version = 1, generated_at = "...", default_partition = "batch",
      enforce = true,            -- refuse impossible requests (false: record only)
      allow_protect = true,      -- honour --comment=defrag:protect
      slurm_user_uid = 0,        -- SlurmUser: may rewrite the record on job updates
      service_uid = 2000,        -- the service's account (--service-user): may put a job
                                 -- into a defrag-* reservation (as root and SlurmUser may)
      pack = { feature = "defrag_partial", max_gpus = 4,     -- absent: no packing hint
               partitions = { "batch" } },
      short_first = { share = 0.1, span = 10080, all = true, large_gpus = 4,
                      cap = 1300, cap_share = 0.1, range = 13000,
                      weights = "Age=1000,FairShare=10000,JobSize=1000,Partition=1000",
                      keep = { demand = 0.5, window = 360 } },  -- or absent
      partitions = {
        ["batch"] = { types = {
          { gpus = 8, models = { ["h100"] = 8 }, nodes = 1, cpus = 32, mem = 64000,
            max_block = 2, block_sizes = { 1, 2 }, topology = "nvlink-8-pairs",
            hosts = "node04" }, ... } },
      },
    }

``cpus`` and ``mem`` (MB) are absent when slurm.conf does not give them.

``pack``: the packing hint (``--prefer=<feature>`` for small one-node jobs) and the
``partitions`` with a node whose slurm.conf ``Features=`` has the feature: the script names
it only for a job all of whose partitions are listed, and render leaves ``pack`` out when
no node has it (a ``--prefer`` naming a feature no node has leaves a pending job with the
reason BadConstraints).

``short_first`` (``--short-first SHARE``, ``--short-first-all``, ``--large-first GPUS``):
the queue order job_submit.lua sets, as a priority boost (a negative ``--nice`` on top of
the job's own) of tier x ``span`` + ``span`` minus the time limit in minutes, scaled into
``[0, cap]``: ``cap`` = ``--boost-cap`` (default 10 %) x the site's priority range
(``range``, the sum of the ``PriorityWeight*`` read from slurm.conf or
``--priority-config``, listed in ``weights``; :mod:`slurm_defrag.packing.queue_order`).
Tier 2: a one-node GPU job only a few nodes can hold (the nodes of its partitions with
its GPU count and type, CPUs and memory are at most SHARE of their GPU nodes); tier 1: at
least ``large_gpus`` GPUs per node; tier 0: every other job, boosted only with ``all``.
Within a tier the short limits go first (slurm-plugins/README.md; measured in
docs/benchmarks.md, "Short first on scarce shapes" and "Large first, short first").

``keep`` (``--keep-scarce DEMAND``): a type marked ``kept = true`` (the big-CPU or
big-memory variant of a common node, :func:`slurm_defrag.packing.node_levers.mark_kept`) is
kept for the jobs only such nodes can hold: while the scarce jobs submitted in the last
``window`` minutes ask for at least ``demand`` of the kept nodes' time, job_submit.lua
adds its ``hosts`` to every other one-node job's ``--exclude`` when the job fits a node
elsewhere.

``block_sizes`` is absent for a node whose topology is unknown: the hook then never
refuses a request because of that node.

``allow_protect`` decides whether users may opt out of requeueing: the hook copies a
user's ``defrag:protect`` into the AdminComment only when it is true, and the service
honours the key from the AdminComment only
(:data:`slurm_defrag.policy.comment_keys.COMMENT_KEYS`), so this one switch decides both.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from slurm_defrag.actuator.lua_table import lua_string, to_lua, write_atomically
from slurm_defrag.errors import InputError
from slurm_defrag.packing.node_levers import mark_kept, short_first_entry
from slurm_defrag.packing.queue_order import (
    DEFAULT_CAP_SHARE,
    PriorityRange,
    check_share,
    read_range,
)
from slurm_defrag.slurm.discovery.slurm_conf import SlurmConf, parse_slurm_conf

if TYPE_CHECKING:  # pydantic models: imported when used, to keep startup fast
    from slurm_defrag.domain.topology import GpuTopology

app = typer.Typer(
    help="Slurm-side hooks (slurm-plugins/): generate what job_submit.lua reads.",
    no_args_is_help=True,
)

TABLE_VERSION = 1
DEFAULT_PACK_FEATURE = "defrag_partial"
# Slurm >= 22.05.6: do not validate --prefer at submission. Without it, 22.05 refuses a job
# whose preferred feature no node of its partition carries *right now* ("Requested node
# configuration is not available"), which would turn a soft hint into a hard failure.
IGNORE_PREFER_VALIDATION = "ignore_prefer_validation"

_FEATURE_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
# -- the table -------------------------------------------------------------------------


@dataclass(frozen=True)
class RenderOptions:
    pack_feature: str | None = DEFAULT_PACK_FEATURE
    pack_max_gpus: int | None = None  # None: half the largest node
    enforce: bool = True
    allow_protect: bool = True
    service_user: str | None = None
    """The service's account (a name or uid): besides root and SlurmUser, the only one the
    hook lets put a job into a ``defrag-*`` reservation."""
    route_file: Path | None = None
    """Where the service writes the per-job route (its ``route_file`` setting)."""
    short_first: float | None = None
    """Share of a partition's GPU nodes at or below which a request counts as scarce."""
    short_first_all: bool = False
    """Every job by its time limit, not only the scarce and large ones."""
    large_first: int | None = None
    """GPUs per node from which a job goes before smaller ones."""
    keep_scarce: float | None = None
    """Keep the scarce node types (packing.node_levers.mark_kept) for the jobs only they hold
    while their demand is at least this (0: always)."""
    boost_cap: float = DEFAULT_CAP_SHARE
    """The queue-order boost is at most this share of the site's priority range."""
    priority_config: Mapping[str, str] | None = None
    """``scontrol show config`` of the live cluster: its ``Priority*`` settings win over
    slurm.conf's."""


def _uid_of(user: str, warnings: list[str], unknown: str) -> int | None:
    """A user's uid (a name resolved on this host, or digits); None, and the warning
    ``unknown`` about it, when there is no such user here."""
    import pwd

    if user.isascii() and user.isdigit() and len(user) <= 10:  # a uid, not a name like "²"
        return int(user)
    try:
        return pwd.getpwnam(user).pw_uid
    except (KeyError, ValueError):  # ValueError: a NUL byte, no name getpwnam can look up
        warnings.append(unknown)
        return None


# (GPUs, sorted (model, count) pairs, NVLink block sizes or None = unknown, topology name,
# CPUs, memory in MB; None = not in slurm.conf)
_TypeKey = tuple[
    int, tuple[tuple[str, int], ...], tuple[int, ...] | None, str | None, int | None, int | None
]


def _block_sizes(topo: GpuTopology) -> list[int]:
    from slurm_defrag.domain.topology import popcount

    return sorted({popcount(b) for b in topo.blocks})


def _node_types(
    conf: SlurmConf, hosts_in: Sequence[str], topologies: Mapping[str, GpuTopology]
) -> list[dict[str, object]]:
    """One partition's node types: nodes alike in GPUs, NVLink blocks, CPUs and memory."""
    import hostlist

    groups: dict[_TypeKey, list[str]] = {}
    for host in hosts_in:
        nc = conf.nodes[host]
        topo = topologies.get(host) if nc.gpus else None
        sizes: tuple[int, ...] | None
        if topo is not None:
            sizes = tuple(_block_sizes(topo))
        elif nc.gpus == 1:
            sizes = (1,)
        else:
            sizes = None
        key: _TypeKey = (
            nc.gpus,
            tuple(sorted(nc.models.items())),
            sizes,
            topo.name if topo else None,
            nc.cpus,
            nc.memory_mb,
        )
        groups.setdefault(key, []).append(host)
    types: list[dict[str, object]] = []
    # Largest nodes first, then by first host: a stable order for diffs.
    for (gpus, models, sizes, topo_name, cpus, memory), hosts in sorted(
        groups.items(), key=lambda kv: (-kv[0][0], kv[1][0])
    ):
        entry: dict[str, object] = {
            "gpus": gpus,
            "models": dict(models),
            "nodes": len(hosts),
            "hosts": hostlist.collect_hostlist(hosts),
        }
        if cpus is not None:
            entry["cpus"] = cpus
        if memory is not None:
            entry["mem"] = memory
        if sizes is not None:
            entry["max_block"] = max(sizes)
            entry["block_sizes"] = list(sizes)
        if topo_name is not None:
            entry["topology"] = topo_name
        types.append(entry)
    return types


def _keep_scarce(partitions: Mapping[str, object], share: float, warnings: list[str]) -> None:
    """Mark the kept node types of every partition and tell the admin which they are."""
    kept: list[str] = []
    for part in partitions.values():
        assert isinstance(part, dict)
        kept += mark_kept(part["types"], share)
    warnings.append(
        "--keep-scarce: "
        + (
            ", ".join(sorted(set(kept)))
            + " will be kept for the jobs only they can hold while those jobs are in demand"
            if kept
            else "no node to keep (no scarce big-CPU/big-memory variant of a common node)"
        )
    )


def build_table(
    conf: SlurmConf,
    topologies: Mapping[str, GpuTopology],
    options: RenderOptions,
    *,
    generated_at: datetime | None = None,
) -> tuple[dict[str, object], list[str]]:
    """The table for ``defrag_nodes.lua`` and the warnings for the admin."""
    warnings = _topology_warnings(conf, topologies)
    partitions: dict[str, object] = {
        pname: {"types": _node_types(conf, part.nodes, topologies)}
        for pname, part in sorted(conf.partitions.items())
    }

    table: dict[str, object] = {
        "version": TABLE_VERSION,
        "generated_at": (generated_at or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "default_partition": conf.default_partition,
        "enforce": options.enforce,
        "allow_protect": options.allow_protect,
        # SlurmUser: besides root, the only one Slurm lets change an AdminComment, so the
        # hook rewrites the record on job updates made by it
        "slurm_user_uid": _uid_of(
            conf.slurm_user,
            warnings,
            f"SlurmUser {conf.slurm_user!r} is unknown on this host: job updates it makes will"
            " not refresh the record (root's still do); render on the controller",
        ),
        "partitions": partitions,
    }
    if options.service_user is not None:
        table["service_uid"] = _uid_of(
            options.service_user,
            warnings,
            f"--service-user {options.service_user!r} is unknown on this host (give its uid, "
            "or render on the controller): only root and SlurmUser may put jobs into defrag-* "
            "reservations",
        )
    if options.route_file is not None:
        table["route_file"] = _route_file(conf, options.route_file)
    short_first = _short_first_entry(conf, options, partitions, warnings)
    if short_first is not None:
        table["short_first"] = short_first
    if options.pack_feature is not None:
        pack = _pack_entry(conf, options, options.pack_feature, warnings)
        if pack is not None:
            table["pack"] = pack
    return table, warnings


def _topology_warnings(conf: SlurmConf, topologies: Mapping[str, GpuTopology]) -> list[str]:
    """Refuse a topology that contradicts slurm.conf's GPU count; warn of GPU nodes with
    none."""
    import hostlist

    warnings: list[str] = []
    for name, node in conf.nodes.items():
        topo = topologies.get(name)
        if topo is not None and node.gpus and topo.gpu_count != node.gpus:
            raise InputError(
                f"topology of {name}: {topo.name!r} has {topo.gpu_count} GPUs, slurm.conf "
                f"says Gres has {node.gpus} (check gres.conf / the topology map)"
            )
    unknown = sorted(n for n, nc in conf.nodes.items() if nc.gpus > 1 and n not in topologies)
    if unknown:
        warnings.append(
            f"{len(unknown)} GPU node(s) have no NVLink topology (no gres.conf Links= and no "
            f"topology template): {hostlist.collect_hostlist(unknown)}; requests are never "
            "refused because of them"
        )
    return warnings


def _route_file(conf: SlurmConf, route_file: Path) -> str:
    if not route_file.is_absolute():
        raise InputError(
            f"--route-file: {str(route_file)!r} must be an absolute path"
            " (slurmctld reads it from its own working directory)"
        )
    if IGNORE_PREFER_VALIDATION not in conf.scheduler_parameters:
        raise InputError(
            f"--route-file: slurm.conf has no SchedulerParameters={IGNORE_PREFER_VALIDATION}"
            "; without it Slurm refuses a job whose --prefer names a node feature that is"
            " gone (the service stopping removes them): add it first"
        )
    return str(route_file)


def _short_first_entry(
    conf: SlurmConf, options: RenderOptions, partitions: dict[str, object], warnings: list[str]
) -> dict[str, object] | None:
    """The ``short_first`` entry (None without ``--short-first``); ``--keep-scarce`` marks
    the kept node types in ``partitions``."""
    if options.short_first is None:
        if (
            options.short_first_all
            or options.large_first is not None
            or options.keep_scarce is not None
        ):
            raise InputError(
                "--short-first-all, --large-first and --keep-scarce need --short-first SHARE"
            )
        check_share(options.boost_cap)
        return None
    prange = (
        read_range(options.priority_config, "--priority-config")
        if options.priority_config is not None
        else read_range(conf.priority, "slurm.conf")
    )
    cap = prange.cap(options.boost_cap)
    entry = short_first_entry(
        options.short_first,
        all_jobs=options.short_first_all,
        large_gpus=options.large_first,
        keep=options.keep_scarce,
        cap=cap,
    )
    entry |= {"cap_share": options.boost_cap, "range": prange.points}
    entry["weights"] = prange.describe()
    warnings += _range_warnings(prange, cap)
    if options.keep_scarce is not None:
        _keep_scarce(partitions, options.short_first, warnings)
    return entry


def _pack_entry(
    conf: SlurmConf, options: RenderOptions, feature: str, warnings: list[str]
) -> dict[str, object] | None:
    """The packing hint's entry; None (with a warning) when Slurm could not honour it."""
    if not _FEATURE_RE.match(feature):
        raise InputError(f"--pack-feature: {feature!r} is not a plain node feature name")
    if IGNORE_PREFER_VALIDATION not in conf.scheduler_parameters:
        warnings.append(
            f"packing hint disabled: slurm.conf SchedulerParameters lacks "
            f"{IGNORE_PREFER_VALIDATION} (Slurm >= 22.05.6). Without it Slurm refuses "
            f"jobs whose --prefer={feature} matches no node of their "
            "partition at submit time; add it, or pass --no-pack to silence this"
        )
        return None
    where = _partitions_with(conf, feature)
    if not where:
        warnings.append(
            f"packing hint disabled: no node in slurm.conf has the feature "
            f"{feature} (Features=), and slurm-defrag does not set it; a "
            "--prefer naming a feature no node has leaves pending jobs with the reason "
            "BadConstraints. Add it to the Features= of the nodes small jobs should "
            "fill first, or pass --no-pack to silence this"
        )
        return None
    largest = max((n.gpus for n in conf.nodes.values()), default=0)
    max_gpus = options.pack_max_gpus
    if max_gpus is None:
        max_gpus = max(1, largest // 2)
    return {"feature": feature, "max_gpus": max_gpus, "partitions": where}


def _partitions_with(conf: SlurmConf, feature: str) -> list[str]:
    """The partitions with a node whose slurm.conf ``Features=`` has ``feature``."""
    return sorted(
        name
        for name, part in conf.partitions.items()
        if any(feature in conf.nodes[h].features for h in part.nodes)
    )


def _range_warnings(prange: PriorityRange, cap: int) -> list[str]:
    """What the admin must know about the range the queue-order cap came from."""
    out: list[str] = []
    if prange.basic:
        out.append(
            f"--short-first: {prange.source} says PriorityType=priority/basic, which has no "
            "priority range (a job's priority is its place in submission order, and a nice "
            "moves it past that many earlier jobs): the boost is off (cap 0), no job's "
            "priority changes; --keep-scarce still applies. Use priority/multifactor with "
            "PriorityWeight* for the queue order"
        )
        return out
    if prange.plugin is None:
        out.append(
            f"--short-first: {prange.source} sets no PriorityType, so the release's default "
            "plugin applies; the cap assumes priority/multifactor. Check with `scontrol show "
            "config | grep PriorityType` (or render with --priority-config FILE, its output; "
            "`slurm-defrag doctor` compares the live range with this table's)"
        )
    if prange.points == 0:
        out.append(
            f"--short-first: {prange.source} sets no PriorityWeight*, so the priority range "
            "is 0: the boost is off (cap 0), no job's priority changes"
        )
    elif cap == 0:
        out.append("--short-first: --boost-cap is 0: the boost is off, no job's priority changes")
    return out


# -- Lua output ------------------------------------------------------------------------


def render_lua(table: Mapping[str, object], sources: Sequence[str]) -> str:
    """The whole file. Every string in it, the comment's source paths included, is a Lua
    string literal of printable ASCII (:func:`lua_string`): a path or name with a newline
    cannot end the comment or the literal and run code in slurmctld."""
    header = [
        "-- defrag_nodes.lua: node types and NVLink block sizes for slurm-defrag's job_submit.lua.",
        "-- Generated by `slurm-defrag plugins render`; do not edit, re-run it instead.",
        "-- Sources: " + ", ".join(lua_string(s) for s in sources),
        "-- slurmctld reads it when it (re)loads job_submit.lua, i.e. when that file's mtime",
        "-- changes (touch it; `plugins render -o` does) or slurmctld restarts.",
    ]
    return "\n".join(header) + "\nreturn " + to_lua(dict(table)) + "\n"


def _short_first_summary(table: Mapping[str, object]) -> str:
    sf = table.get("short_first")
    if not isinstance(sf, dict):
        return "off"
    cap, points = sf["cap"], sf["range"]
    assert isinstance(cap, int)
    assert isinstance(points, int)
    if not cap:
        return f"on, without a boost (cap 0; priority range {points})"
    share = 100 * cap / points
    return f"on (boost at most {cap} priority points: {share:.3g} % of the range {points})"


def _read_show_config(path: Path) -> dict[str, str]:
    """``--priority-config``: a file (or ``-``, stdin) holding ``scontrol show config``."""
    from slurm_defrag.slurm.controller import parse_show_config

    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read --priority-config: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: --priority-config is not UTF-8 (byte {exc.start})") from None
    conf = parse_show_config(text)
    if not any(k.startswith("Priority") for k in conf):
        raise InputError(
            f"{path}: --priority-config has no Priority* line: give it the output of "
            "`scontrol show config`"
        )
    return conf


def _read_topology_map(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read topology map: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("topology_templates"), dict):
        data = data["topology_templates"]
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise InputError(
            f"{path}: expected a JSON object host list -> topology template, "
            'e.g. {"gpu[001-064]": "nvswitch-8"}'
        )
    return data


_RenderSlurmConfOpt = Annotated[
    Path,
    typer.Option("--slurm-conf", help="slurm.conf: nodes, GRES, partitions.", readable=False),
]
_RenderGresConfOpt = Annotated[
    Path | None,
    typer.Option(
        "--gres-conf",
        help="gres.conf with Links= rows "
        "(default: SLURM_DEFRAG_SLURM_GRES_CONF, else the gres.conf beside --slurm-conf).",
        readable=False,
    ),
]
_RenderTopologyMapOpt = Annotated[
    Path | None,
    typer.Option(
        "--topology-map",
        help='JSON host list -> built-in topology, e.g. {"gpu[001-064]": "nvswitch-8"} '
        "(default: the service's SLURM_DEFRAG_SLURM_TOPOLOGY_TEMPLATES). gres.conf Links= "
        "win over it.",
        readable=False,
    ),
]
_RenderOutOpt = Annotated[
    Path | None,
    typer.Option("--out", "-o", help="Write here (atomically) instead of stdout.", readable=False),
]
_RenderPackFeatureOpt = Annotated[
    str,
    typer.Option("--pack-feature", help="Node feature the service keeps on partly used GPU nodes."),
]
_RenderPackMaxGpusOpt = Annotated[
    int | None,
    typer.Option(
        "--pack-max-gpus",
        min=1,
        help="Largest one-node job (GPUs) that gets the packing hint "
        "(default: half the largest node).",
    ),
]
_RenderNoPackOpt = Annotated[
    bool, typer.Option("--no-pack", help="No packing hint (--prefer) at all.")
]
_RenderNoEnforceOpt = Annotated[
    bool,
    typer.Option("--no-enforce", help="Record only: never refuse a request."),
]
_RenderNoUserProtectOpt = Annotated[
    bool,
    typer.Option(
        "--no-user-protect",
        help="Ignore users' --comment=defrag:protect opt-outs (the hook records none, and "
        "the service honours the key from the AdminComment only).",
    ),
]
_RenderServiceUserOpt = Annotated[
    str | None,
    typer.Option(
        "--service-user",
        help="The service's account (name or uid): besides root and SlurmUser, the only "
        "one allowed to put a job into a defrag-* reservation (its hand-over).",
    ),
]
_RenderRouteFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--route-file",
        help="Where the service writes the per-job route (its route_file setting, for "
        "packing_lever = fgd-route-score); default: defrag_route.lua beside the table.",
        readable=False,
    ),
]
_RenderShortFirstOpt = Annotated[
    float | None,
    typer.Option(
        "--short-first",
        help="Queue order by priority boost (a negative nice): a one-node GPU job that at "
        "most this share of its partitions' GPU nodes can hold goes first, shortest "
        "time limit first (e.g. 0.1).",
    ),
]
_RenderShortFirstAllOpt = Annotated[
    bool,
    typer.Option(
        "--short-first-all",
        help="With --short-first: every job goes by its time limit, shortest first.",
    ),
]
_RenderLargeFirstOpt = Annotated[
    int | None,
    typer.Option(
        "--large-first",
        help="With --short-first: jobs of at least this many GPUs per node go before "
        "smaller ones (after the scarce ones), shortest time limit first.",
    ),
]
_RenderKeepScarceOpt = Annotated[
    float | None,
    typer.Option(
        "--keep-scarce",
        help="With --short-first: keep the big-CPU/big-memory variants of common nodes "
        "for the jobs only they can hold (other jobs get them in --exclude) while the "
        "scarce jobs of the last 6 h ask for at least this share of their time "
        "(e.g. 0.5; 0: always).",
    ),
]
_RenderBoostCapOpt = Annotated[
    float,
    typer.Option(
        "--boost-cap",
        help="With --short-first: the boost is at most this share of the site's "
        "priority range (the sum of its PriorityWeight*), so fair-share, QOS and age "
        "keep the rest; 0: no boost (default 0.1).",
    ),
]
_RenderPriorityConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--priority-config",
        readable=False,  # read by read_range: one line for a bad file
        help="The output of `scontrol show config` ('-': stdin): the live PriorityType "
        "and PriorityWeight* the cap is computed from (default: slurm.conf's).",
    ),
]
_RenderProfileOpt = Annotated[
    Path | None,
    typer.Option(
        "--profile",
        readable=False,  # read by load_profile: one line for a bad file
        help='A profile file (docs/simulator.md, "Profiles"): its [job_submit] table gives '
        "--short-first, --short-first-all, --large-first, --keep-scarce and --boost-cap, "
        "the queue order the simulator measured with it.",
    ),
]
_RenderNoTouchOpt = Annotated[
    bool,
    typer.Option(
        "--no-touch",
        help="Do not touch job_submit.lua next to --out (touching it makes slurmctld "
        "reload the script and this table on the next submission).",
    ),
]


@app.command()
def render(
    slurm_conf: _RenderSlurmConfOpt,
    gres_conf: _RenderGresConfOpt = None,
    topology_map: _RenderTopologyMapOpt = None,
    out: _RenderOutOpt = None,
    pack_feature: _RenderPackFeatureOpt = DEFAULT_PACK_FEATURE,
    pack_max_gpus: _RenderPackMaxGpusOpt = None,
    no_pack: _RenderNoPackOpt = False,
    no_enforce: _RenderNoEnforceOpt = False,
    no_user_protect: _RenderNoUserProtectOpt = False,
    service_user: _RenderServiceUserOpt = None,
    route_file: _RenderRouteFileOpt = None,
    short_first: _RenderShortFirstOpt = None,
    short_first_all: _RenderShortFirstAllOpt = False,
    large_first: _RenderLargeFirstOpt = None,
    keep_scarce: _RenderKeepScarceOpt = None,
    boost_cap: _RenderBoostCapOpt = DEFAULT_CAP_SHARE,
    priority_config: _RenderPriorityConfigOpt = None,
    profile: _RenderProfileOpt = None,
    no_touch: _RenderNoTouchOpt = False,
) -> None:
    """Write defrag_nodes.lua, the node table job_submit.lua reads."""
    from slurm_defrag.commands.render_profile import QueueOptions, queue_options
    from slurm_defrag.slurm.connection import load_settings
    from slurm_defrag.slurm.discovery.topology_sources import node_topologies

    given = QueueOptions(short_first, short_first_all, large_first, keep_scarce, boost_cap)
    queue = queue_options(given, profile)  # a bad profile: before any other file is read
    templates = _read_topology_map(topology_map) if topology_map is not None else None
    settings = load_settings(gres_conf=gres_conf, topology_templates=templates)
    beside = slurm_conf.parent / "gres.conf"
    if settings.gres_conf is None and settings.discover_gres_conf and beside.is_file():
        # as the service finds it: the gres.conf beside slurm.conf (Slurm's own place)
        settings = settings.model_copy(update={"gres_conf": beside})
    conf = parse_slurm_conf(slurm_conf)
    live = _read_show_config(priority_config) if priority_config is not None else None
    options = RenderOptions(
        pack_feature=None if no_pack else pack_feature,
        pack_max_gpus=pack_max_gpus,
        enforce=not no_enforce,
        allow_protect=not no_user_protect,
        service_user=service_user,
        route_file=route_file,
        short_first=queue.short_first,
        short_first_all=queue.short_first_all,
        large_first=queue.large_first,
        keep_scarce=queue.keep_scarce,
        boost_cap=queue.boost_cap,
        priority_config=live,
    )
    table, warnings = build_table(conf, node_topologies(settings), options)
    sources = [str(slurm_conf)]
    if settings.gres_conf is not None:
        sources.append(str(settings.gres_conf))
    if topology_map is not None:
        sources.append(str(topology_map))
    if priority_config is not None and "short_first" in table:
        sources.append(str(priority_config))
    text = render_lua(table, sources)
    for w in warnings:
        typer.echo(f"slurm-defrag: warning: {w}", err=True)
    if out is None or str(out) == "-":
        sys.stdout.write(text)
        return
    write_atomically(out, text)
    parts = table["partitions"]
    assert isinstance(parts, dict)
    summary = (
        f"wrote {out}: {len(parts)} partition(s), "
        f"packing hint {'on' if 'pack' in table else 'off'}, "
        f"short first {_short_first_summary(table)}, "
        f"{'refusing impossible requests' if options.enforce else 'recording only'}, "
        "defrag-* reservations for root, SlurmUser"
        + (f" and uid {table['service_uid']}" if table.get("service_uid") is not None else " only")
    )
    # slurmctld re-reads job_submit.lua (and so this table) when the script's mtime
    # changes; 22.05's `scontrol reconfigure` does not reload an unchanged script.
    script = out.parent / "job_submit.lua"
    if not no_touch and script.exists():
        try:
            os.utime(script)
            summary += f"; touched {script}: slurmctld reloads it on the next submission"
        except OSError as exc:
            summary += f"; could not touch {script} ({exc.strerror}): touch it yourself"
    else:
        summary += "; touch job_submit.lua so slurmctld reloads it"
    typer.echo(summary, err=True)
