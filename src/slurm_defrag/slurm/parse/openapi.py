"""Slurm's OpenAPI JSON -> domain objects, one mapping per schema family.

``squeue --json``, ``sinfo --json``, ``scontrol show ... --json`` and slurmrestd print the
same schema for a given Slurm release, so the cli and rest backends share these functions:

* :class:`V0038` — the ``openapi/v0.0.36``..``v0.0.38`` plugins (Slurm 21.08-22.05): plain
  numbers, ``"job_state": "RUNNING"``, node ``"state": "idle"`` + ``"state_flags"``.
* :class:`V0042` — ``data_parser/v0.0.39`` and later (Slurm 23.02+; recorded on v0.0.42,
  Slurm 24.11): numbers as ``{"set", "infinite", "number"}``, states as lists.

:func:`family` picks one from the document's ``meta``. Every function is pure and raises
:class:`~slurm_defrag.slurm.failures.SlurmParseError` naming the field it could not read,
except :meth:`V0038.read_jobs`: a job record that does not read costs that job only
(:mod:`slurm_defrag.slurm.parse.records`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import datetime
from functools import partial
from typing import Any

from slurm_defrag.domain.cluster import (
    GpuRequest,
    Job,
    Node,
    Partition,
    RecordPart,
    Reservation,
)
from slurm_defrag.slurm.failures import SlurmParseError, from_failure
from slurm_defrag.slurm.parse import cpu_memory
from slurm_defrag.slurm.parse import mapping as m
from slurm_defrag.slurm.parse.records import JobParts, JobsRead, json_job_head

P = RecordPart


class V0038:
    """Slurm 21.08-22.05 (openapi/v0.0.36-38)."""

    name = "v0.0.38"

    # -- version-specific spellings (overridden by V0042) ------------------------------

    def node_state(self, d: m.Doc) -> list[str]:
        return [d.text("state"), *d.strings("state_flags")]

    def node_features(self, d: m.Doc) -> tuple[str, ...]:
        return _features(d)

    def job_nodes(self, d: m.Doc) -> tuple[str, ...]:
        """Allocated nodes in allocation order: the order of ``gres_detail``."""
        res = d.get("job_resources")
        if isinstance(res, dict):
            allocated = m.Doc(res, d.where, d.field("job_resources")).items("allocated_nodes")
            names = [a.get("nodename") for a in allocated]
            if names and all(isinstance(n, str) for n in names):
                return tuple(names)
        return m.expand_nodes(d.text("nodes"), d.where, d.field("nodes"))

    def partition_nodes(self, d: m.Doc) -> str:
        return d.text("nodes")

    def priority_tier(self, d: m.Doc) -> int:
        return d.number("priority_tier") or 0

    def partition_preempt_mode(self, d: m.Doc) -> str:
        return m.preempt_mode(d.get("preemption_mode"), d.where, d.field("preemption_mode"))

    def cluster(self, doc: m.Doc) -> str | None:
        """v0.0.38 names the cluster only in job records: the first job's, if it is a name
        (one record's junk must not fail the read, issue #40)."""
        jobs = doc.get("jobs")
        first = jobs[0] if isinstance(jobs, list) and jobs else None
        name = first.get("cluster") if isinstance(first, dict) else None
        return name if isinstance(name, str) and name not in m.NULLS else None

    # -- shared mapping ----------------------------------------------------------------

    def nodes(self, doc: m.Doc) -> list[Node]:
        return [self.node(d) for d in doc.items("nodes")]

    def node(self, d: m.Doc) -> Node:
        where, path = d.where, d.path
        return m.build(
            Node,
            where,
            path,
            name=d.req("name"),
            partitions=m.split_list(d.get("partitions"), where, d.field("partitions")),
            state=m.node_flags(self.node_state(d)),
            **m.node_gpu_fields(
                d.text("gres"), d.text("gres_used"), where, d.field("gres"), d.field("gres_used")
            ),
            reservation=d.text("reservation") or None,
            features=self.node_features(d),
            weight=d.number("weight"),
            reason=d.text("reason"),
            **cpu_memory.node_fields(**cpu_memory.read(cpu_memory.NODE_HOST, "openapi", d.number)),
        )

    def jobs(self, doc: m.Doc) -> list[Job]:
        """The jobs of the document (what is left out: :meth:`read_jobs`)."""
        return self.read_jobs(doc).jobs

    def read_jobs(self, doc: m.Doc) -> JobsRead:
        """Every job record, each on its own (:mod:`slurm_defrag.slurm.parse.records`): only a
        ``jobs`` that is not a list fails the read."""
        out = JobsRead()
        base = doc.field("jobs")
        doc.req("jobs")  # no list of jobs at all: the document is broken, not one record
        for i, data in enumerate(doc.array("jobs")):
            out.add(partial(self._record, data, doc.where, f"{base}[{i}]"))
        return out

    def _record(self, data: Any, where: str, path: str, r: JobParts) -> Job | None:
        return self.job(m.Doc(data, where, path), r)

    def job(self, d: m.Doc, r: JobParts | None = None) -> Job | None:
        """One job, or None for a finished one (it holds and waits for nothing).

        ``r`` reads the fields (strict unless :func:`records.read_job` reads again)."""
        r = r or JobParts()
        f = json_job_head(r, d, lambda: _job_id(d), state_key="job_state", requeue_key="requeue")
        if f is None:
            return None
        f["request"] = request = r.one(P.GRES_REQUEST, lambda: _request(d, f), None)
        f |= r.each(
            P.GRES_REQUEST,
            {
                "shards": lambda: m.shards_asked(
                    d.text("tres_per_node"), d.where, d.field("tres_per_node")
                )
            },
        )
        f |= r.each(
            P.GPU_ALLOCATION,
            {"gpus": lambda: self.job_gpus(d), "shard_use": lambda: self.job_shards(d)},
        )
        f |= r.each(P.NODE_LIMITS, _own_limits(d))
        f |= r.group(
            P.HOST_USE,
            lambda: cpu_memory.job_use(f["state"], self.job_allocation(d), _job_needs(d, request)),
        )
        return r.build(d.where, d.path, f)

    def job_allocation(self, d: m.Doc) -> list[cpu_memory.HostUse]:
        """Per node CPUs and memory from ``job_resources.allocated_nodes`` (v0.0.38-40).

        These schemas list allocated *cores* per node (``sockets.<s>.cores.<c>:
        "allocated"``), not CPUs; ``cpus_used`` is not the allocation. The job's CPUs over
        its allocated cores give CPUs per core (threads), exact when it divides evenly.
        """
        res = d.get("job_resources")
        if not isinstance(res, dict):
            return []
        nodes = m.Doc(res, d.where, d.field("job_resources")).items("allocated_nodes")
        cores = [_allocated_cores(n) for n in nodes]
        cpus, total = d.number("cpus") or 0, sum(cores)
        per_core = cpus // total if total and cpus % total == 0 else 0
        return [
            cpu_memory.HostUse(c * per_core, n.number("memory_allocated") or 0)
            for c, n in zip(cores, nodes, strict=True)
        ]

    def job_gpus(self, d: m.Doc) -> dict[str, frozenset[int]]:
        """``gres_detail`` has one string per allocated node, in allocation order."""
        details = d.array("gres_detail")
        if not details:
            return {}
        nodes = self.job_nodes(d)
        if len(nodes) != len(details):
            raise d.error(
                "gres_detail", f"{len(details)} entries for {len(nodes)} nodes {m.show(nodes)}"
            )
        out = {}
        for i, (node, detail) in enumerate(zip(nodes, details, strict=True)):
            if not isinstance(detail, str):
                raise d.error(f"gres_detail[{i}]", f"expected a string, got {m.show(detail)}")
            out[node] = m.indices(detail, d.where, d.field(f"gres_detail[{i}]"))
        return out

    def job_shards(self, d: m.Doc) -> tuple[tuple[str, int, int], ...]:
        """The shard entries of ``gres_detail`` (checked against the nodes by job_gpus)."""
        out: list[tuple[str, int, int]] = []
        for i, (node, detail) in enumerate(
            zip(self.job_nodes(d), d.array("gres_detail"), strict=False)
        ):
            if isinstance(detail, str) and "shard" in detail:
                out += m.job_shard_use(node, detail, d.where, d.field(f"gres_detail[{i}]"))
        return tuple(out)

    def partitions(self, doc: m.Doc) -> list[Partition]:
        return [
            m.build(
                Partition,
                d.where,
                d.path,
                name=d.req("name"),
                nodes=m.expand_nodes(self.partition_nodes(d), d.where, d.field("nodes")),
                priority_tier=self.priority_tier(d),
                preempt_mode=self.partition_preempt_mode(d),
            )
            for d in doc.items("partitions")
        ]

    def reservations(self, doc: m.Doc, now: datetime) -> list[Reservation]:
        return [m.reservation(d, now, "node_list", _flags) for d in doc.items("reservations")]


class V0042(V0038):
    """Slurm 23.02+ (data_parser/v0.0.39 and later; recorded on v0.0.42)."""

    name = "v0.0.42"

    def node_state(self, d: m.Doc) -> list[str]:
        return d.strings("state")

    def job_nodes(self, d: m.Doc) -> tuple[str, ...]:
        res = d.get("job_resources")
        if isinstance(res, dict) and isinstance(res.get("nodes"), dict):
            base = d.field("job_resources.nodes")
            allocation = m.Doc(res["nodes"], d.where, base).items("allocation")
            names = [a.get("name") for a in allocation]
            if names and all(isinstance(n, str) for n in names):
                return tuple(names)
        return m.expand_nodes(d.text("nodes"), d.where, d.field("nodes"))

    def job_allocation(self, d: m.Doc) -> list[cpu_memory.HostUse]:
        """``job_resources.nodes.allocation[]``: ``cpus.count``, ``memory.allocated``."""
        res = d.get("job_resources")
        if not (isinstance(res, dict) and isinstance(res.get("nodes"), dict)):
            return super().job_allocation(d)  # v0.0.39-40 keep the older shape
        where, base = d.where, d.field("job_resources.nodes")
        allocation = m.Doc(res["nodes"], where, base).items("allocation")
        return [
            cpu_memory.HostUse(_inner(a, "cpus", "count"), _inner(a, "memory", "allocated"))
            for a in allocation
        ]

    def partition_nodes(self, d: m.Doc) -> str:
        nodes = d.get("nodes")
        return m.Doc(nodes, d.where, d.field("nodes")).text("configured") if nodes else ""

    def priority_tier(self, d: m.Doc) -> int:
        prio = d.get("priority")
        return m.Doc(prio, d.where, d.field("priority")).number("tier") or 0 if prio else 0

    def partition_preempt_mode(self, d: m.Doc) -> str:
        # data_parser v0.0.42 has no partition preemption mode; newer ones may.
        key = "preempt_mode" if d.get("preempt_mode") else "preemption_mode"
        return m.preempt_mode(d.get(key), d.where, d.field(key))

    def cluster(self, doc: m.Doc) -> str | None:
        meta = doc.get("meta")
        slurm = meta.get("slurm") if isinstance(meta, dict) else None
        if not isinstance(slurm, dict):
            return None
        return m.Doc(slurm, doc.where, "meta.slurm").text("cluster") or None


def _flags(d: m.Doc) -> tuple[str, ...]:
    return tuple(sorted(f.upper() for f in m.split_list(d.get("flags"), d.where, d.field("flags"))))


def _job_id(d: m.Doc) -> str:
    return m.job_id(
        d.req("job_id"),
        d.number("array_job_id"),
        d.number("array_task_id"),
        d.number("het_job_id"),
        d.number("het_job_offset"),
        where=d.where,
        field=d.field("job_id"),
    )


def _request(d: m.Doc, fields: Mapping[str, Any]) -> GpuRequest | None:
    return m.gpu_request(
        where=d.where,
        path=d.path,
        per_node=d.text("tres_per_node"),
        per_job=d.text("tres_per_job"),
        per_task=d.text("tres_per_task"),
        nodes=d.number("node_count"),
        tasks=d.number("tasks"),
        exclusive=_exclusive(d),
        comment=fields.get("comment", ""),
        admin_comment=fields.get("admin_comment", ""),
    )


def _job_needs(d: m.Doc, request: GpuRequest | None) -> cpu_memory.HostUse:
    return cpu_memory.needed(
        **cpu_memory.read(cpu_memory.ASKED, "openapi", d.number),
        gpus=cpu_memory.gpus_per_node(request),
        cpus_per_gpu=cpu_memory.per_gpu(d.text("cpus_per_tres"), d.where, d.field("cpus_per_tres")),
        memory_per_gpu=cpu_memory.per_gpu(
            d.text("memory_per_tres"), d.where, d.field("memory_per_tres")
        ),
    )


def _allocated_cores(node: m.Doc) -> int:
    """Cores marked allocated in a v0.0.38 ``{"sockets": {"0": {"cores": {"0": ...}}}}``."""
    sockets = node.get("sockets")
    if not isinstance(sockets, dict):
        return 0
    return sum(
        str(state).lower().startswith("allocated")
        for socket in sockets.values()
        if isinstance(socket, dict) and isinstance(socket.get("cores"), dict)
        for state in socket["cores"].values()
    )


def _inner(d: m.Doc, key: str, number: str) -> int:
    """``d[key][number]`` (e.g. ``cpus.count``); absent or unset is 0 (unknown)."""
    sub = d.get(key)
    return (m.Doc(sub, d.where, d.field(key)).number(number) or 0) if sub else 0


def _exclusive(d: m.Doc) -> bool:
    """``--exclusive`` shows as ``"shared": "none"`` (22.05) or ``["none"]`` (24.11)."""
    shared = d.get("shared")
    words = [d.text("shared")] if isinstance(shared, str) or shared is None else d.strings("shared")
    return any(w.lower() in ("none", "exclusive", "no") for w in words)


def _features(d: m.Doc) -> tuple[str, ...]:
    return m.split_list(d.get("active_features"), d.where, d.field("active_features"))


_API_VERSION = re.compile(r"v([0-9]{1,4})\.([0-9]{1,4})\.([0-9]{1,4})")


def api_version(text: str) -> tuple[int, int, int]:
    """``"v0.0.40"`` -> ``(0, 0, 40)``: API versions compare as numbers, never as strings
    (as strings, ``"v0.0.40" < "v0.0.9"``)."""
    match = _API_VERSION.fullmatch(text)
    if match is None:
        raise SlurmParseError(f"not a slurmrestd API version: {m.show(text)}")
    major, minor, patch = (int(g) for g in match.groups())
    return major, minor, patch


def family(data: Any, where: str) -> V0038:
    """The mapping for a document, from its ``meta`` (plugin or data_parser version)."""
    doc = m.Doc(data, where, "")
    meta = doc.get("meta")
    plugin = meta.get("plugin") if isinstance(meta, dict) else None
    if not isinstance(plugin, dict):
        raise doc.error("meta.plugin", "missing: cannot tell the schema version")
    parser = plugin.get("data_parser")
    parser = parser if isinstance(parser, str) else ""
    if parser.startswith("data_parser/"):
        return V0042()
    ptype = plugin.get("type")
    ptype = ptype if isinstance(ptype, str) else ""
    found = _API_VERSION.fullmatch(ptype.removeprefix("openapi/"))
    if ptype.startswith("openapi/") and found and (0, 0, 30) <= api_version(found[0]) <= (0, 0, 38):
        return V0038()
    raise doc.error("meta.plugin", f"unknown schema {m.show(ptype or parser)}")


def error_texts(data: Any) -> list[str]:
    """The in-band ``errors`` of a Slurm JSON answer, one text each.

    Both ``description`` and ``error`` are kept: 24.11 puts "Unable to query jobs" in one
    and the cause, "Unable to contact slurm controller", in the other.
    """
    errors = data.get("errors") if isinstance(data, dict) else None
    if not errors:
        return []
    if not isinstance(errors, list):  # not Slurm's shape, yet it says something failed
        return [m.show(errors)]
    out = []
    for e in errors:
        if isinstance(e, dict):
            parts = [_text(e[k]) for k in ("description", "error") if e.get(k)]
            out.append(": ".join(dict.fromkeys(parts)) or m.show(e))
        else:
            out.append(_text(e))
    return out


def _text(v: Any) -> str:
    """An error text as Slurm sent it if a string, else a short repr (never deep str())."""
    return v if isinstance(v, str) else m.show(v)


def check_errors(data: Any, what: str, stderr: str = "") -> None:
    """Slurm reports failures inside the JSON too (``errors``); surface them."""
    texts = error_texts(data)
    if texts:
        raise from_failure(what, "; ".join(texts), stderr)


def _own_limits(d: m.Doc) -> dict[str, Callable[[], str]]:
    """Readers of the job's -w / -x / --constraint as typed (see :func:`mapping.user_text`)."""
    return {
        ours: partial(m.user_text, d.get(key), d.where, d.field(key))
        for ours, key in (
            ("required_nodes", "required_nodes"),
            ("excluded_nodes", "excluded_nodes"),
            ("constraint", "features"),
        )
    }
