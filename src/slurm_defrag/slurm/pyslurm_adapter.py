"""The ``pyslurm`` backend (optional extra ``slurm-defrag[pyslurm]``).

Written to the pyslurm 25.11 API (``Nodes.load()``, ``Jobs.load()``,
``Job.get_resource_layout_per_node()``, ``Reservations.load()``, ``Partitions.load()``; writes
via ``Job.requeue()``, ``Job.modify()``, ``Node.modify()``, ``Reservation.create()/delete()``)
and run live with pyslurm 25.11.2 on Slurm 25.11.7 (compose suite s2511: snapshot equal to the
cli and rest ones, tests/e2e/test_pyslurm_live.py). The mapping is tested offline on the
recorded pyslurm 24.11 and 25.11 dumps (``to_dict()`` of each object) through stand-ins.
pyslurm X.Y builds only against Slurm X.Y, so install the pyslurm matching your Slurm.

pyslurm cannot clear a field: its string setter turns "" into NULL, which Slurm reads as
"unchanged" (pyslurm/utils/cstr.pyx ``fmalloc``). Detaching a job from its reservation
(``ReservationName=""``, the step before the reservation is deleted) would silently do
nothing, and the delete then fails with "Requested reservation is in use" (seen live on
25.11.7). Such an update goes through ``scontrol`` (the cli backend, same settings) instead.

pyslurm's ``Node`` has no per-GPU indices (``allocated_gres`` holds counts, and is even
empty on 24.11): a node's busy GPUs are the union of the running jobs' layouts. A job's
shards come as a count per node, without the GPU (:func:`layout_shard_nodes`). So where a
job whose record did not read whole (:mod:`slurm_defrag.slurm.parse.records`) may hold GPUs its
layout does not name, every GPU of the node counts busy (:class:`_Jobs`).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from slurm_defrag.domain.cluster import (
    HOLDS_GPUS,
    ClusterSnapshot,
    GpuRequest,
    Job,
    Node,
    Partition,
    RecordPart,
    Reservation,
)
from slurm_defrag.errors import InputError
from slurm_defrag.slurm import ids
from slurm_defrag.slurm.connection import SlurmSettings
from slurm_defrag.slurm.failures import SlurmParseError, SlurmRejectedError, from_failure
from slurm_defrag.slurm.parse import cpu_memory
from slurm_defrag.slurm.parse import mapping as m
from slurm_defrag.slurm.parse.records import JobParts, Unidentified, json_job_head, read_job
from slurm_defrag.slurm.port import NewReservation, SlurmWriter
from slurm_defrag.slurm.snapshot_assembly import Parts, assemble
from slurm_defrag.slurm.update_fields import job_field, node_field

log = logging.getLogger(__name__)

WHERE = "pyslurm"
P = RecordPart

# pyslurm's ReservationFlags names -> the names scontrol and the JSON use.
_RESV_FLAGS = {
    "MAINTENANCE": "MAINT",
    "IGNORE_RUNNING_JOBS": "IGNORE_JOBS",
    "STATIC_NODES": "STATIC_ALLOC",
    "PARTITION_NODES_ONLY": "PART_NODES",
    "USER_DELETION": "USER_DELETE",
    "PURGE": "PURGE_COMP",
    "SPECIFIC_NODES": "SPEC_NODES",
    "NO_JOB_HOLD_AFTER_END": "NO_HOLD_JOBS_AFTER_END",
}


# -- mapping (pure; takes to_dict() output) --------------------------------------------


def tres_text(v: Any, where: str = WHERE, field: str = "tres") -> str:
    """``{"gres/gpu:a100": 2}`` (24.11 ``gres_per_node``) or a 25.11 TrackableResources."""
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if not isinstance(v, Mapping):
        for method in ("to_dict", "as_dict"):
            if callable(getattr(v, method, None)):
                return tres_text(getattr(v, method)(), where, field)
        raise m.parse_error(where, field, f"expected TRES, got {m.show(v)}")
    for k, n in v.items():
        if not isinstance(k, str) or isinstance(n, bool) or not isinstance(n, int):
            raise m.parse_error(where, field, f"expected TRES counts, got {m.show(v)}")
    return ",".join(f"{k}:{n}" for k, n in v.items())


def _layout(layout: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(layout, Mapping) or not all(isinstance(k, str) for k in layout):
        problem = f"expected node -> layout, got {m.show(layout)}"
        raise m.parse_error(WHERE, f"{path}.layout", problem)
    return layout


def layout_gpus(layout: Mapping[str, Any], path: str) -> dict[str, frozenset[int]]:
    """``{"node01": {"gres": {"gpu:a100": {"count": 4, "indexes": "0-3"}}}}`` -> indices.

    Each entry is re-spelt as ``gpu:a100:4(IDX:0-3)`` so the one GRES parser checks it.
    """
    out: dict[str, frozenset[int]] = {}
    for node, res in _layout(layout, path).items():
        if not isinstance(res, Mapping):  # not "no GPUs": what it holds here is unknown
            problem = f"expected an object, got {m.show(res)}"
            raise m.parse_error(WHERE, f"{path}.layout.{node}", problem)
        gres = res.get("gres")
        if gres is not None and not isinstance(gres, Mapping):
            problem = f"expected an object, got {m.show(gres)}"
            raise m.parse_error(WHERE, f"{path}.layout.{node}.gres", problem)
        found: set[int] = set()
        for key, spec in (gres or {}).items():
            if not str(key).startswith("gpu") or not isinstance(spec, Mapping):
                continue
            field = f"{path}.layout.{node}.gres.{key}"
            count, indexes = spec.get("count"), spec.get("indexes")
            if type(count) is not int or not isinstance(indexes, str):
                problem = f"expected count and indexes, got {m.show(spec)}"
                raise m.parse_error(WHERE, field, problem)
            found |= m.indices(f"{key}:{count}(IDX:{indexes})", WHERE, field)
        if found:
            out[node] = frozenset(found)
    return out


def layout_shard_nodes(layout: Mapping[str, Any]) -> set[str]:
    """Nodes where the layout holds shards: ``{"node04": {"gres": {"shard": 3}}}``
    (recorded with pyslurm 25.11.2 on Slurm 25.11.7: a count, no GPU index)."""
    out = set()
    for node, res in layout.items():
        gres = res.get("gres") if isinstance(res, Mapping) else None
        if isinstance(gres, Mapping) and any(str(k).startswith("shard") for k in gres):
            out.add(node)
    return out


def layout_host(layout: Mapping[str, Any], path: str) -> list[cpu_memory.HostUse]:
    """``{"node01": {"cpu_ids": "0-3", "memory": 4096}}`` -> CPUs and memory per node."""
    out = []
    for node, res in _layout(layout, path).items():
        d = m.Doc(res, WHERE, f"{path}.layout.{node}")
        cpus = cpu_memory.count_ids(d.text("cpu_ids"), WHERE, d.field("cpu_ids"))
        out.append(cpu_memory.HostUse(cpus, d.number("memory") or 0))
    return out


def job(d: m.Doc, layout: Any, parts: JobParts | None = None) -> Job | None:
    """One job from its ``to_dict()`` and its ``get_resource_layout_per_node()``; None for a
    finished job. ``parts`` reads the fields (strict unless :func:`records.read_job` reads
    again)."""
    r = parts or JobParts()
    f = json_job_head(r, d, lambda: _job_id(d), state_key="state", requeue_key="is_requeueable")
    if f is None:
        return None
    f["request"] = request = r.one(P.GRES_REQUEST, lambda: _request(d, f), None)
    f |= r.each(
        P.GRES_REQUEST,
        {"shards": lambda: m.shards_asked(_per_node(d), d.where, d.field(_per_node_key(d)))},
    )
    f |= r.each(P.GPU_ALLOCATION, {"gpus": lambda: layout_gpus(layout, d.path)})
    f |= r.each(
        P.NODE_LIMITS,
        {
            ours: partial(m.user_text, d.get(key), d.where, d.field(key))
            for ours, key in (
                ("required_nodes", "required_nodes"),
                ("excluded_nodes", "excluded_nodes"),
                ("constraint", "constraints"),
            )
        },
    )

    def use() -> dict[str, int]:
        asked = cpu_memory.read(cpu_memory.ASKED, "pyslurm", d.number)
        need = cpu_memory.needed(**asked, gpus=cpu_memory.gpus_per_node(request))
        return cpu_memory.job_use(f["state"], layout_host(layout, d.path), need)

    f |= r.group(P.HOST_USE, use)
    return r.build(d.where, d.path, f)


def _job_id(d: m.Doc) -> str:
    return m.job_id(
        d.req("id"),
        d.number("array_id"),
        d.number("array_task_id"),
        d.number("heterogeneous_id"),
        d.number("heterogeneous_offset"),
        where=d.where,
        field=d.field("id"),
    )


def _per_node_key(d: m.Doc) -> str:
    # 25.11 calls it tres_per_node; 24.11 only has the now deprecated gres_per_node.
    return "tres_per_node" if d.get("tres_per_node") else "gres_per_node"


def _per_node(d: m.Doc) -> str:
    key = _per_node_key(d)
    return tres_text(d.get(key), d.where, d.field(key))


def _request(d: m.Doc, fields: Mapping[str, Any]) -> GpuRequest | None:
    sharing = d.text("resource_sharing").upper()
    return m.gpu_request(
        where=d.where,
        path=d.path,
        per_node=_per_node(d),
        per_job=tres_text(d.get("tres_per_job"), d.where, d.field("tres_per_job")),
        per_task=tres_text(d.get("tres_per_task"), d.where, d.field("tres_per_task")),
        nodes=d.number("num_nodes"),
        tasks=d.number("ntasks"),
        exclusive=sharing in ("NO", "EXCLUSIVE", "NONE"),
        comment=fields.get("comment", ""),
        admin_comment=fields.get("admin_comment", ""),
    )


_warned_unplaced: set[str] = set()
"""Nodes whose unplaced shards were said already (once per node and process)."""


def node(
    d: m.Doc, used: frozenset[int], shards_unplaced: bool = False, unread: bool = False
) -> Node:
    """``shards_unplaced``: jobs hold shards here on GPUs pyslurm does not name, so every
    GPU counts as busy (a GPU carrying shards takes no whole-GPU job; which ones, only the
    cli and rest backends can tell), said once per node. ``unread``: a job whose record did
    not read may hold GPUs here: every GPU counts as busy too (the warning of the read
    names the job). So does a job claiming a GPU past the node's last (the read makes that
    job unreadable)."""
    gres = tres_text(d.get("configured_gres"), d.where, d.field("configured_gres"))
    fields = m.node_gpu_fields(gres, None, d.where, d.field("configured_gres"), "")
    if unread or any(i >= fields["gpu_count"] for i in used):
        used = frozenset(range(fields["gpu_count"]))
    if shards_unplaced and d.text("name") not in _warned_unplaced:
        _warned_unplaced.add(d.text("name"))
        log.warning(
            "pyslurm: %s: jobs hold shards on GPUs pyslurm does not name; its GPUs are "
            "counted busy (the cli and rest backends see which)",
            d.text("name"),
        )
    if shards_unplaced:
        used = frozenset(range(fields["gpu_count"]))
    return m.build(
        Node,
        d.where,
        d.path,
        name=d.req("name"),
        partitions=m.split_list(d.get("partitions"), d.where, d.field("partitions")),
        state=m.node_flags([d.text("state")]),
        **fields,
        gpus_used=used,
        features=m.split_list(d.get("active_features"), d.where, d.field("active_features")),
        weight=d.number("weight"),
        reason=d.text("reason"),
        **cpu_memory.node_fields(**cpu_memory.read(cpu_memory.NODE_HOST, "pyslurm", d.number)),
    )


def partition(d: m.Doc) -> Partition:
    return m.build(
        Partition,
        d.where,
        d.path,
        name=d.req("name"),
        nodes=m.expand_nodes(d.text("nodes"), d.where, d.field("nodes")),
        priority_tier=d.number("priority_tier") or 0,
        preempt_mode=m.preempt_mode(d.get("preempt_mode"), d.where, d.field("preempt_mode")),
    )


def reservation_flags(v: Any, where: str = WHERE, field: str = "flags") -> tuple[str, ...]:
    """``ReservationFlags.IGNORE_RUNNING_JOBS|SPECIFIC_NODES`` -> scontrol flag names."""
    if v is not None and not isinstance(v, str) and not hasattr(v, "name"):
        raise m.parse_error(where, field, f"expected reservation flags, got {m.show(v)}")
    text = str(v or "")
    if "." in text.split("|", 1)[0]:
        text = text.split(".", 1)[1]
    names = [n.strip() for n in text.split("|") if n.strip() and n.strip() != "0"]
    return tuple(sorted(_RESV_FLAGS.get(n, n) for n in names))


def reservation(d: m.Doc, now: datetime) -> Reservation:
    return m.reservation(d, now, "nodes", _flags)


def _flags(d: m.Doc) -> tuple[str, ...]:
    return reservation_flags(d.get("flags"), d.where, d.field("flags"))


def objects(loaded: Any) -> Iterable[Any]:
    """The objects of a loaded collection: pyslurm 25.11's ``Jobs``/``Nodes``/... are maps
    (iterating one yields ids), a plain list of objects is taken as it is."""
    values = getattr(loaded, "values", None)
    return values() if callable(values) else loaded  # type: ignore[no-any-return]


def parts_from(
    nodes: Iterable[Any],
    jobs: Iterable[Any],
    partitions: Iterable[Any],
    reservations: Iterable[Any],
    now: datetime,
) -> Parts:
    """Map loaded pyslurm objects (anything with ``to_dict()``) to snapshot parts."""
    read = _Jobs()
    cluster: str | None = None
    for i, obj in enumerate(objects(jobs)):
        data = job_dict(obj)
        cluster = cluster or _cluster(data)
        read.add(data, obj.get_resource_layout_per_node() or {}, f"jobs[{i}]")
    used: dict[str, set[int]] = {}
    for j in read.jobs:
        if j.state in HOLDS_GPUS:
            for name, idx in j.gpus.items():
                used.setdefault(name, set()).update(idx)
    mapped_nodes = []
    for i, obj in enumerate(objects(nodes)):
        data = obj.to_dict()
        cluster = cluster or _cluster(data)
        d = m.Doc(data, WHERE, f"nodes[{i}]")
        name = d.text("name")
        busy = read.everywhere or name in read.unread
        mapped_nodes.append(node(d, frozenset(used.get(name, ())), name in read.shards, busy))
    return Parts(
        nodes=mapped_nodes,
        jobs=read.jobs,
        partitions=[
            partition(m.Doc(o.to_dict(), WHERE, f"partitions[{i}]"))
            for i, o in enumerate(objects(partitions))
        ],
        reservations=[
            reservation(m.Doc(o.to_dict(), WHERE, f"reservations[{i}]"), now)
            for i, o in enumerate(objects(reservations))
        ],
        cluster=cluster,
        left_out=read.left_out,
    )


def _cluster(data: Any) -> str | None:
    """The cluster a record names, if it is a plain name (a job's record may be junk)."""
    value = data.get("cluster") if isinstance(data, Mapping) else None
    return value if isinstance(value, str) and value not in m.NULLS else None


class Unconvertible:
    """A job attribute pyslurm itself could not convert: reading it fails that field (the
    record is then unreadable, or left out if it is the id or state), as any value of the
    wrong type does."""

    def __init__(self, error: BaseException) -> None:
        self.error = f"{type(error).__name__}: {error}"

    def __repr__(self) -> str:
        return f"<pyslurm could not convert it: {self.error}>"


def job_dict(obj: Any) -> Any:
    """``obj.to_dict()``; when pyslurm's own conversion of one attribute fails, every
    attribute on its own, the failed ones as :class:`Unconvertible`.

    pyslurm 25.11 raises ValueError from ``Job.to_dict()`` for a job that asked
    ``--gres=gpu:abc:xyz:1`` (Slurm 24.11 and later hold such a job): without this the
    whole read failed, every cycle, for everyone (issue #40, found live on 25.11.7).
    """
    try:
        return obj.to_dict()
    except Exception:  # pyslurm's conversions may raise anything: read field by field
        pass
    out: dict[str, Any] = {}
    for name in dir(obj):
        if name.startswith("_"):
            continue
        try:
            value = getattr(obj, name)
        except Exception as exc:  # that attribute only
            out[name] = Unconvertible(exc)
            continue
        if not callable(value):
            out[name] = value
    return out


@dataclass
class _Jobs:
    """The jobs of one read, and the nodes whose GPUs pyslurm cannot place.

    pyslurm has no node-level view of busy GPUs (see the module docstring): a GPU is busy
    when a job's layout names it. So where a job holds GPUs or shards its layout does not
    name, every GPU of the node counts busy: shards (``shards``), and the nodes a job may
    hold whose record did not read (``unread``; ``everywhere`` when not even its nodes
    did).
    """

    jobs: list[Job] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    shards: set[str] = field(default_factory=set)
    unread: set[str] = field(default_factory=set)
    everywhere: bool = False

    def add(self, data: Any, layout: Any, path: str) -> None:
        try:
            j, parts = read_job(partial(_record, data, layout, path))
        except Unidentified as exc:
            # No state either, perhaps: whatever its layout names may be held.
            self.left_out.append(exc.reason)
            self._may_hold(data, layout, path)
            return
        if j is None:
            return
        self.jobs.append(j)
        if j.state not in HOLDS_GPUS:
            return
        if isinstance(layout, Mapping):
            self.shards |= layout_shard_nodes(layout)
        if P.GPU_ALLOCATION in parts.failed:
            self._may_hold(data, layout, path)

    def _may_hold(self, data: Any, layout: Any, path: str) -> None:
        """The layout's nodes, else the job's ``allocated_nodes``, else every node."""
        try:
            self.unread |= set(_layout(layout, path))
            return
        except SlurmParseError:
            pass
        hosts = data.get("allocated_nodes") if isinstance(data, Mapping) else None
        if isinstance(hosts, str):
            try:
                names = m.expand_nodes(hosts, WHERE, f"{path}.allocated_nodes")
            except SlurmParseError:
                names = ()
            if names:
                self.unread |= set(names)
                return
        self.everywhere = True


def _record(data: Any, layout: Any, path: str, parts: JobParts) -> Job | None:
    return job(m.Doc(data, WHERE, path), layout, parts)


# -- the backend -----------------------------------------------------------------------


def import_pyslurm() -> Any:
    try:
        return importlib.import_module("pyslurm")
    except ImportError as exc:
        raise InputError(
            f"the pyslurm backend needs pyslurm ({exc}); install slurm-defrag[pyslurm] with "
            "the pyslurm release matching your Slurm (X.Y must equal Slurm X.Y)"
        ) from None


class PyslurmSlurm(SlurmWriter):
    """Reader and writer over pyslurm (see the module docstring for what ran live)."""

    name = "pyslurm"

    def __init__(
        self,
        settings: SlurmSettings | None = None,
        module: Any = None,
        clock: Callable[[], datetime] | None = None,
        clearing_writer: SlurmWriter | None = None,
    ) -> None:
        self.settings = settings or SlurmSettings(backend="pyslurm")
        self._module = module
        self._clock = clock or (lambda: datetime.now(UTC))
        self._clearing_writer = clearing_writer

    def _clearer(self) -> SlurmWriter:
        """The writer of updates that clear a field (see the module docstring)."""
        if self._clearing_writer is None:
            from slurm_defrag.slurm.cli_backend import CliSlurm

            self._clearing_writer = CliSlurm(self.settings)
        return self._clearing_writer

    @property
    def ps(self) -> Any:
        if self._module is None:
            self._module = import_pyslurm()
        return self._module

    def _rpc(self, what: str, call: Callable[[], Any]) -> Any:
        """Run one pyslurm call; its RPCError becomes unavailable/rejected by message."""
        error: type[BaseException] = Exception
        for name in ("PyslurmError", "RPCError"):  # pyslurm's base error, where it exists
            if isinstance(found := getattr(self.ps, name, None), type):
                error = found
                break
        try:
            return call()
        except error as exc:
            raise from_failure(what, str(exc)) from None

    def snapshot(self) -> ClusterSnapshot:
        taken_at = self._clock()
        ps = self.ps
        parts = parts_from(
            self._rpc("Nodes.load", ps.Nodes.load),
            self._rpc("Jobs.load", ps.Jobs.load),
            self._rpc("Partitions.load", ps.Partitions.load),
            self._rpc("Reservations.load", ps.Reservations.load),
            taken_at,
        )
        return assemble(
            parts, source=self.name, taken_at=taken_at, settings=self.settings, where=WHERE
        )

    def create_reservation(self, r: NewReservation) -> None:
        name, nodes, duration_s, users, accounts, start = r.checked()
        ps = self.ps
        begin = start or self._clock()
        resv = ps.Reservation(
            name=name,
            nodes=",".join(nodes),
            users=list(users),
            accounts=list(accounts),
            start_time=begin,
            end_time=begin + timedelta(seconds=max(60, duration_s)),
            flags=ps.ReservationFlags.IGNORE_RUNNING_JOBS,
        )
        try:
            self._rpc(f"create reservation {name}", resv.create)
        except SlurmRejectedError:
            existing = self._existing_reservation(name)
            if existing is None or set(m.expand_nodes(existing, WHERE, "nodes")) != set(nodes):
                raise

    def _existing_reservation(self, name: str) -> str | None:
        try:
            return str(self.ps.Reservation.load(name).nodes or "")
        except Exception:  # pyslurm raises RPCError for "doesn't exist"; any failure = absent
            return None

    def delete_reservation(self, name: str) -> None:
        name = ids.reservation_name(name)
        try:
            self._rpc(f"delete reservation {name}", self.ps.Reservation(name).delete)
        except SlurmRejectedError:
            if self._existing_reservation(name) is not None:
                raise

    def requeue(self, job_id: str, reason: str) -> None:
        number = _numeric(job_id)  # before anything of pyslurm is touched
        self._rpc(f"requeue {job_id}", self.ps.Job(number).requeue)

    def update_job(self, job_id: str, **fields: str) -> None:
        number = _numeric(job_id)
        if any(value == "" for value in fields.values()):
            log.info("update job %s through scontrol: pyslurm cannot clear a field", job_id)
            self._clearer().update_job(job_id, **fields)
            return
        changes = {job_field(key, job_id, self.name).pyslurm: v for key, v in fields.items()}
        desc = self.ps.JobSubmitDescription(**changes)
        self._rpc(f"update job {job_id}", lambda: self.ps.Job(number).modify(desc))

    def update_node(self, node: str, **fields: str) -> None:
        node = ids.node_name(node)
        changes: dict[str, Any] = {}
        for key, value in fields.items():
            attr = node_field(key, node, self.name)
            changes[attr] = int(value) if attr == "weight" else value
        diff = self.ps.Node(**changes)
        self._rpc(f"update node {node}", lambda: self.ps.Node(node).modify(diff))


def _numeric(job_id: str) -> int:
    """pyslurm's ``Job(id)`` takes the unique numeric id only (not ``123_4``/``123+1``)."""
    ids.job_id(job_id)  # the same message as the other writers for a value that is no id
    try:
        return ids.numeric_job_id(job_id)
    except SlurmRejectedError:
        raise SlurmRejectedError(
            f"Slurm rejected job {job_id}: the pyslurm backend takes plain numeric job ids"
        ) from None
