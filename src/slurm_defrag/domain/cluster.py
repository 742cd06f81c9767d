"""The cluster snapshot: nodes, GPUs, jobs, reservations at one instant.

Pydantic v2 models, frozen, ``extra="forbid"`` so a typo in a snapshot file is an error
that names the field. JSON shape is documented in ``docs/snapshot-format.md`` and carries an
explicit ``schema_version``.

Ownership of GPUs is stated once, on jobs (``Job.gpus``: node -> indices), exactly as Slurm
reports it per job (``GRES=gpu:a100:2(IDX:0-1)``). Nodes additionally carry
``gpus_used``: the node-level ``GresUsed`` view. The two are merged (indices are range-checked
at load time): a GPU that the node reports busy but no visible job holds is kept as used by
an unknown owner (a job of another user we may not see) rather than counted as free. Which
reservation holds a node is read from ``Node.reservation`` (adapters fill it from the
reservation's node list); ``reservations`` is the list of reservations themselves.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from enum import StrEnum
from functools import cached_property
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from slurm_defrag.domain.topology import BUILTIN_TOPOLOGIES, GpuTopology, mask_of

SCHEMA_VERSION: Final = 1

# Memory per GPU (GB) of common models, used when a reader cannot learn it from Slurm.
GPU_MEMORY_GB: dict[str, float] = {
    "a100": 40.0,
    "a100-40g": 40.0,
    "a100-80g": 80.0,
    "a100-80gb": 80.0,
    "h100": 80.0,
    "h100-nvl": 94.0,
    "h200": 141.0,
    "b200": 192.0,
    "gb200": 192.0,
    "v100": 32.0,
    "v100-16g": 16.0,
    "a40": 48.0,
    "l40s": 48.0,
    "t4": 16.0,
}

# Sets serialise sorted so that snapshot JSON is stable (diffable, hashable in the store).
IndexSet = Annotated[frozenset[int], PlainSerializer(sorted, return_type=list[int])]


MIN_YEAR: Final = 1970
MAX_YEAR: Final = 2199


def _aware(value: datetime) -> datetime:
    """Refuse a timestamp without a time zone, or one outside years 1970..2199.

    Naive and aware times cannot be compared (a naive one made ``plan`` crash), and
    guessing the zone of a file's times would shift ages and deadlines silently. The year
    bound keeps arithmetic on them (ages, TTLs, the UTC conversion) from overflowing.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("timestamp without a time zone: add Z (UTC) or an offset like +02:00")
    if not MIN_YEAR <= value.year <= MAX_YEAR:
        raise ValueError(f"timestamp outside the years {MIN_YEAR}..{MAX_YEAR}")
    return value


Timestamp = Annotated[datetime, AfterValidator(_aware)]
"""A point in time with its UTC offset (every datetime of a snapshot)."""


def _omit_defaults(
    model: BaseModel, handler: SerializerFunctionWrapHandler, optional: Mapping[str, object]
) -> dict[str, Any]:
    """Dump ``model`` without the ``optional`` fields that hold their default.

    CPU and memory fields (and a pending job's planned start) came after schema version 1
    files were written: leaving them out when unset keeps those files (and the store's
    node and job bodies) byte-identical.
    """
    data: dict[str, Any] = handler(model)
    for key, default in optional.items():
        if key in data and getattr(model, key) == default:  # () dumps as [] in JSON mode
            del data[key]
    return data


_NODE_HOST_DEFAULTS: Final = {
    "topology_source": None,
    "cpus": None,
    "cpus_alloc": 0,
    "memory_mb": None,
    "memory_alloc_mb": 0,
    "shards": 0,
}
_JOB_OPTIONAL_DEFAULTS: Final = {
    "cpus_per_node": 0,
    "memory_mb_per_node": 0,
    "planned_start": None,
    "shards": 0,
    "shard_use": (),
    "required_nodes": "",
    "excluded_nodes": "",
    "constraint": "",
    "unreadable": "",
}

TopologySource = Literal["gres.conf", "map", "collector", "template"]
"""Where a live snapshot's node topology came from (see docs/service.md, precedence)."""

LIVE_SOURCES: Final = frozenset({"cli", "rest", "pyslurm"})
"""Snapshot sources read from Slurm. Slurm never reports NVLinks, so in these a GPU node
without a topology is *unknown*; in files and the simulator ``topology: null`` is what the
writer stated (PCIe only), as it always was."""

UNKNOWN_TOPOLOGY: Final = "unknown"
"""Name shown for a GPU node whose topology no source gave; reserved (no custom topology
may take it)."""

UNKNOWN_OWNER = "?"
"""Owner of a GPU that the node reports busy but no job in the snapshot holds."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NodeFlag(StrEnum):
    """Node state words as Slurm prints them (base state and flags, upper case)."""

    IDLE = "IDLE"
    MIXED = "MIXED"
    ALLOCATED = "ALLOCATED"
    COMPLETING = "COMPLETING"
    DOWN = "DOWN"
    DRAIN = "DRAIN"
    DRAINING = "DRAINING"
    DRAINED = "DRAINED"
    FAIL = "FAIL"
    RESERVED = "RESERVED"
    MAINTENANCE = "MAINTENANCE"
    NOT_RESPONDING = "NOT_RESPONDING"
    POWERED_DOWN = "POWERED_DOWN"
    POWERING_UP = "POWERING_UP"
    FUTURE = "FUTURE"
    INVAL = "INVAL"
    UNKNOWN = "UNKNOWN"
    PLANNED = "PLANNED"
    CLOUD = "CLOUD"
    REBOOT_REQUESTED = "REBOOT_REQUESTED"


_UNSCHEDULABLE = frozenset(
    {
        NodeFlag.DOWN,
        NodeFlag.DRAIN,
        NodeFlag.DRAINING,
        NodeFlag.DRAINED,
        NodeFlag.FAIL,
        NodeFlag.NOT_RESPONDING,
        NodeFlag.POWERED_DOWN,
        NodeFlag.FUTURE,
        NodeFlag.INVAL,
        NodeFlag.MAINTENANCE,
    }
)


class Node(_Frozen):
    name: Annotated[str, Field(min_length=1)]
    partitions: tuple[str, ...] = ()
    state: Annotated[frozenset[NodeFlag], PlainSerializer(sorted, return_type=list[str])] = (
        frozenset({NodeFlag.IDLE})
    )
    gpu_model: str | None = None
    gpu_count: Annotated[int, Field(ge=0, le=16)] = 0
    gpu_memory_gb: Annotated[float, Field(ge=0)] = 0.0
    topology: str | None = Field(
        default=None, description="name of a built-in or snapshot-level GPU topology"
    )
    gpus_used: IndexSet = Field(
        default=frozenset(), description="GPU indices the node reports busy (GresUsed IDX)"
    )
    topology_source: TopologySource | None = Field(
        default=None,
        description="where a live read found the topology: gres.conf | map | collector | "
        "template; None = no source (unknown in a live snapshot, see LIVE_SOURCES)",
    )
    reservation: str | None = None
    nvlink_domain: str | None = Field(
        default=None, description="multi-node NVLink domain (e.g. an NVL72 rack) this node is in"
    )
    features: tuple[str, ...] = ()
    weight: int | None = None
    reason: str = ""
    cpus: Annotated[int, Field(ge=0)] | None = Field(
        default=None, description="CPUs Slurm schedules on the node (CPUTot); None = not tracked"
    )
    cpus_alloc: Annotated[int, Field(ge=0)] = Field(
        default=0, description="CPUs allocated to jobs (CPUAlloc), GPU jobs or not"
    )
    memory_mb: Annotated[int, Field(ge=0)] | None = Field(
        default=None, description="schedulable memory (RealMemory, MB); None = not tracked"
    )
    memory_alloc_mb: Annotated[int, Field(ge=0)] = Field(
        default=0, description="memory allocated to jobs (AllocMem, MB)"
    )
    gpu_milli_used: tuple[Annotated[int, Field(ge=0, le=1000)], ...] = Field(
        default=(),
        description="milli-GPUs in use per GPU index (Slurm shard GRES: shards used / shards "
        "per GPU x 1000); empty = not tracked (a GPU is then wholly free or wholly busy)",
    )
    shards: Annotated[int, Field(ge=0)] = Field(
        default=0, description="shard GRES configured on the node (Gres=shard:N); 0 = none"
    )

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = _omit_defaults(self, handler, _NODE_HOST_DEFAULTS)
        if not data.get("gpu_milli_used", True):
            del data["gpu_milli_used"]  # not tracked: keep version-1 files byte-identical
        return data

    @field_validator("state", mode="before")
    @classmethod
    def _upper_state(cls, v: object) -> object:
        if isinstance(v, str):
            v = [p for p in v.replace("+", ",").split(",") if p]
        if isinstance(v, list | tuple | set | frozenset):
            return frozenset(str(x).upper().rstrip("*~#!%$@^-") for x in v)
        return v

    @model_validator(mode="after")
    def _check(self) -> Node:
        bad = sorted(i for i in self.gpus_used if not 0 <= i < self.gpu_count)
        if bad:
            raise ValueError(f"gpus_used: index {bad[0]} outside 0..{self.gpu_count - 1}")
        if self.gpu_count and not self.gpu_model:
            raise ValueError("gpu_model is required when gpu_count > 0")
        if self.gpu_milli_used and len(self.gpu_milli_used) != self.gpu_count:
            raise ValueError(
                f"gpu_milli_used: {len(self.gpu_milli_used)} entries for {self.gpu_count} GPUs"
            )
        return self

    @property
    def cpus_free(self) -> int | None:
        """CPUs not allocated (None when the node's CPUs are not tracked).

        Never negative: an oversubscribed node (``OverSubscribe=FORCE``) has none free.
        """
        return None if self.cpus is None else max(0, self.cpus - self.cpus_alloc)

    @property
    def memory_free_mb(self) -> int | None:
        """Memory not allocated, MB (None when not tracked)."""
        return None if self.memory_mb is None else max(0, self.memory_mb - self.memory_alloc_mb)

    @property
    def drained(self) -> bool:
        return bool(self.state & {NodeFlag.DRAIN, NodeFlag.DRAINING, NodeFlag.DRAINED})

    @property
    def down(self) -> bool:
        return bool(self.state & {NodeFlag.DOWN, NodeFlag.FAIL, NodeFlag.NOT_RESPONDING})

    @cached_property
    def reserved(self) -> bool:
        return NodeFlag.RESERVED in self.state or self.reservation is not None

    @cached_property
    def schedulable(self) -> bool:
        """Slurm may start new jobs here (not drained, down, powered off, ...).

        A reserved node is still schedulable for the reservation's users; reservations are
        handled separately by callers that know the job.
        """
        return not (self.state & _UNSCHEDULABLE)

    @cached_property
    def available(self) -> bool:
        """New GPU work may land here: schedulable, not reserved, has GPUs."""
        return self.schedulable and not self.reserved and self.gpu_count > 0


class JobState(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUSPENDED = "SUSPENDED"
    COMPLETING = "COMPLETING"
    COMPLETED = "COMPLETED"
    CANCELLED = "CANCELLED"
    FAILED = "FAILED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    REQUEUED = "REQUEUED"
    REQUEUE_HOLD = "REQUEUE_HOLD"
    REQUEUE_FED = "REQUEUE_FED"
    RESIZING = "RESIZING"
    SPECIAL_EXIT = "SPECIAL_EXIT"
    STOPPED = "STOPPED"
    CONFIGURING = "CONFIGURING"


HOLDS_GPUS = frozenset(
    {
        JobState.RUNNING,
        JobState.SUSPENDED,
        JobState.COMPLETING,
        JobState.CONFIGURING,
        JobState.STOPPED,
    }
)


class RecordPart(StrEnum):
    """The part of a Slurm job record a reader could not understand.

    The reason of :attr:`Job.unreadable` and :attr:`ClusterSnapshot.left_out`, and the
    ``reason`` label of ``slurm_defrag_unreadable_jobs_total``: a small fixed set, so a
    job's own text never becomes a label.
    """

    JOB_ID = "job_id"
    """no job id a writer could act on: the record is left out"""
    STATE = "state"
    """no job state slurm-defrag knows (a newer Slurm's word, junk): left out"""
    RECORD = "record"
    """not a record at all (not an object, text that does not read unambiguously): left out"""
    GRES_REQUEST = "gres_request"
    """what the job asks for: TRES per node, job or task, shards, node and task counts"""
    GPU_ALLOCATION = "gpu_allocation"
    """which GPUs and shards it holds, on which nodes"""
    TIME = "time"
    """submit, start or end time, time limit"""
    HOST_USE = "host_use"
    """CPUs and memory it holds or needs"""
    NODE_LIMITS = "node_limits"
    """its own -w, -x, --constraint"""
    FIELD = "field"
    """any other field: name, user, account, partition, QOS, priority, comments, flags"""


LEFT_OUT_PARTS: Final = frozenset({RecordPart.JOB_ID, RecordPart.STATE, RecordPart.RECORD})
"""Parts without which a record is no job: it is left out of the snapshot."""

MAX_REASON: Final = 400
"""Characters of an unreadable record's reason (the rest of a long value is cut)."""

_CONTROL_CHARS = re.compile(
    r"[\x00-\x1f\x7f-\x9f"  # C0, DEL, C1
    r"\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidi controls
    r"\u2028\u2029]"  # line and paragraph separators
)


def record_reason(part: RecordPart, detail: str) -> str:
    """``"<part>: <detail>"``: one line of bounded length, control and bidi characters
    shown escaped (the detail quotes what Slurm printed, which a job owner may have typed)."""
    line = _CONTROL_CHARS.sub(lambda c: c[0].encode("unicode_escape").decode(), detail)
    if len(line) > MAX_REASON:
        line = line[: MAX_REASON - 1] + "\u2026"
    return f"{part.value}: {line}"


def reason_part(reason: str) -> RecordPart:
    """The part a :func:`record_reason` names (ValueError for any other text)."""
    head, sep, detail = reason.partition(": ")
    if not sep or not detail:
        raise ValueError("expected '<part>: <reason>'")
    try:
        part = RecordPart(head)
    except ValueError:
        raise ValueError(
            f"unknown part {head[:40]!r}, must be one of {', '.join(p.value for p in RecordPart)}"
        ) from None
    if record_reason(part, detail) != reason:
        raise ValueError("one line of at most 400 characters, control characters escaped")
    return part


class GpuRequest(_Frozen):
    """What a pending job asks for, normalised from --gres / --gpus-per-node / --gpus.

    Either ``gpus_per_node`` (times ``nodes``) or ``total_gpus`` (``--gpus=N`` without a
    per-node count: Slurm may spread them over nodes, unless ``nvlink`` is set, in which case
    they must come from one node or one multi-node NVLink domain).
    """

    nodes: Annotated[int, Field(ge=1)] = 1
    gpus_per_node: Annotated[int, Field(ge=1, le=16)] | None = None
    total_gpus: Annotated[int, Field(ge=1)] | None = None
    gpu_model: str | None = Field(default=None, description="required GPU type, None = any")
    nvlink: bool = Field(default=False, description="needs an NVLink-connected block")
    whole_node: bool = Field(default=False, description="--exclusive: every GPU of each node")

    @model_validator(mode="after")
    def _one_shape(self) -> GpuRequest:
        if (self.gpus_per_node is None) == (self.total_gpus is None):
            raise ValueError("give exactly one of gpus_per_node or total_gpus")
        return self

    @property
    def gpus(self) -> int:
        """Total GPUs the job needs."""
        if self.gpus_per_node is not None:
            return self.gpus_per_node * self.nodes
        assert self.total_gpus is not None
        return self.total_gpus

    def per_node_shape(self) -> tuple[int, int] | None:
        """(nodes, GPUs per node) if fixed, else None (a spreadable --gpus=N request).

        An NVLink ``--gpus=N`` request with one node is fixed at (1, N).
        """
        if self.gpus_per_node is not None:
            return self.nodes, self.gpus_per_node
        assert self.total_gpus is not None
        if self.nvlink and self.nodes == 1:
            return 1, self.total_gpus
        return None


ShardHold = tuple[str, Annotated[int, Field(ge=0, lt=16)], Annotated[int, Field(ge=1)]]
"""(node, GPU index, shards): where a running job's shards are."""


class Job(_Frozen):
    id: Annotated[str, Field(min_length=1, description="'123', array '123_4', het '123+1'")]
    name: str = ""
    user: str = ""
    account: str = ""
    partition: str = ""
    qos: str = ""
    priority: int = 0
    state: JobState
    reason: str = Field(default="", description="Slurm's pending reason, e.g. Resources")
    submit_time: Timestamp | None = None
    start_time: Timestamp | None = None
    planned_start: Timestamp | None = Field(
        default=None,
        description="pending: when slurmctld's scheduler expects it to start (StartTime of a "
        "pending job, set by backfill's plan); None = no plan known",
    )
    time_limit_s: Annotated[int, Field(ge=0)] | None = Field(
        default=None, description="seconds; None = unlimited"
    )
    requeue: bool = True
    gpus: Annotated[
        Mapping[str, frozenset[int]],
        PlainSerializer(lambda m: {k: sorted(v) for k, v in sorted(m.items())}),
    ] = Field(default_factory=dict, description="node -> GPU indices held (running jobs)")
    request: GpuRequest | None = Field(default=None, description="GPU request (pending jobs)")
    comment: str = ""
    admin_comment: str = ""
    cpus_per_node: Annotated[int, Field(ge=0)] = Field(
        default=0, description="CPUs held (running) or needed (pending) on each node; 0 = unknown"
    )
    memory_mb_per_node: Annotated[int, Field(ge=0)] = Field(
        default=0, description="memory held or needed on each node, MB; 0 = unknown"
    )
    shards: Annotated[int, Field(ge=0)] = Field(
        default=0, description="shards (gres/shard: shares of one GPU) asked on each node"
    )
    shard_use: tuple[ShardHold, ...] = Field(
        default=(), description="(node, GPU index, shards) a running shard job holds"
    )
    # The job's own placement limits, as Slurm prints them (user input: kept as text and
    # read by the planner, which leaves a job it cannot read out rather than guess).
    required_nodes: str = Field(default="", description="--nodelist (-w) host list")
    excluded_nodes: str = Field(default="", description="--exclude (-x) host list")
    constraint: str = Field(default="", description="--constraint feature expression")
    unreadable: str = Field(
        default="",
        description="why a reader could not understand the record ('<part>: <reason naming "
        "the field>'); such a job is out of planning: never a victim, never a target, its "
        "GPUs stay busy. Empty = read whole",
    )

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _omit_defaults(self, handler, _JOB_OPTIONAL_DEFAULTS)

    @field_validator("unreadable")
    @classmethod
    def _reason(cls, v: str) -> str:
        if v and reason_part(v) in LEFT_OUT_PARTS:
            raise ValueError("a record without a readable id or state is left out, not kept")
        return v

    @model_validator(mode="after")
    def _unreadable_asks_nothing(self) -> Job:
        # One rule instead of a check in every consumer of pending jobs (metrics, the
        # strategies, the planner): a job out of planning asks for nothing.
        if self.unreadable and self.request is not None:
            raise ValueError("request: an unreadable job asks for nothing (leave it out)")
        return self

    @property
    def unreadable_part(self) -> RecordPart | None:
        """The part of its record a reader could not understand (None: read whole)."""
        return reason_part(self.unreadable) if self.unreadable else None

    @field_validator("gpus", mode="after")
    @classmethod
    def _freeze_gpus(cls, v: Mapping[str, frozenset[int]]) -> Mapping[str, frozenset[int]]:
        return _FrozenDict({k: frozenset(s) for k, s in v.items() if s})

    @property
    def gpu_count(self) -> int:
        return sum(len(s) for s in self.gpus.values())

    @property
    def holds_gpus(self) -> bool:
        return self.state in HOLDS_GPUS and bool(self.gpus)


class _FrozenDict(dict[str, frozenset[int]]):
    """A dict that refuses mutation and hashes, so frozen models stay hashable."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def _refuse(self, *a: object, **k: object) -> None:
        raise TypeError("snapshot data is immutable")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _refuse  # type: ignore[assignment]


class Reservation(_Frozen):
    name: str
    nodes: tuple[str, ...] = ()
    start_time: Timestamp | None = None
    end_time: Timestamp | None = None
    users: tuple[str, ...] = ()
    accounts: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    state: str = "ACTIVE"


class Partition(_Frozen):
    name: str
    nodes: tuple[str, ...] = ()
    priority_tier: int = 1
    preempt_mode: str = ""


class NvlinkDomain(_Frozen):
    """GPUs of several nodes joined by one NVLink fabric (NVL72 rack, topology/block)."""

    name: str
    nodes: tuple[str, ...]


class ClusterSnapshot(_Frozen):
    schema_version: Literal[1] = SCHEMA_VERSION
    cluster: str = "cluster"
    taken_at: Timestamp
    source: str = Field(default="file", description="cli | rest | pyslurm | file | simulator")
    topologies: dict[str, GpuTopology] = Field(
        default_factory=dict, description="custom topologies; built-in names need no entry"
    )
    nodes: tuple[Node, ...] = ()
    jobs: tuple[Job, ...] = ()
    reservations: tuple[Reservation, ...] = ()
    partitions: tuple[Partition, ...] = ()
    nvlink_domains: tuple[NvlinkDomain, ...] = ()
    left_out: tuple[str, ...] = Field(
        default=(),
        description="job records a reader could not identify ('<part>: <reason>' each, part "
        "job_id, state or record): not in jobs; their GPUs stay busy through the nodes' own "
        "view. Left out of the JSON when empty",
    )

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _omit_defaults(self, handler, {"left_out": ()})

    @field_validator("left_out")
    @classmethod
    def _left_out_reasons(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for i, reason in enumerate(v):
            try:
                part = reason_part(reason)
            except ValueError as exc:
                raise ValueError(f"[{i}]: {exc}") from None
            if part not in LEFT_OUT_PARTS:
                raise ValueError(f"[{i}]: a record with a readable id and state is kept")
        return v

    @model_validator(mode="after")
    def _cross_check(self) -> ClusterSnapshot:
        if UNKNOWN_TOPOLOGY in self.topologies:
            raise ValueError(f"topologies: {UNKNOWN_TOPOLOGY!r} is reserved for unknown nodes")
        nodes = {}
        for i, n in enumerate(self.nodes):
            if n.name in nodes:
                raise ValueError(f"nodes[{i}].name: duplicate node {n.name!r}")
            nodes[n.name] = n
            if n.topology is not None:
                topo = self.topologies.get(n.topology) or BUILTIN_TOPOLOGIES.get(n.topology)
                if topo is None:
                    raise ValueError(f"nodes[{i}].topology: unknown topology {n.topology!r}")
                if topo.gpu_count != n.gpu_count:
                    raise ValueError(
                        f"nodes[{i}].topology: {n.topology!r} has {topo.gpu_count} GPUs, "
                        f"node has gpu_count={n.gpu_count}"
                    )
        ids: set[str] = set()
        holder: dict[tuple[str, int], str] = {}
        for j, job in enumerate(self.jobs):
            if job.id in ids:
                raise ValueError(f"jobs[{j}].id: duplicate job {job.id!r}")
            ids.add(job.id)
            for node_name, idx in job.gpus.items():
                node = nodes.get(node_name)
                if node is None:
                    raise ValueError(f"jobs[{j}].gpus: unknown node {node_name!r}")
                for g in idx:
                    if not 0 <= g < node.gpu_count:
                        raise ValueError(
                            f"jobs[{j}].gpus.{node_name}: GPU index {g} outside "
                            f"0..{node.gpu_count - 1}"
                        )
                    if job.holds_gpus:
                        other = holder.setdefault((node_name, g), job.id)
                        if other != job.id:
                            raise ValueError(
                                f"jobs[{j}].gpus.{node_name}: GPU {g} also held by job {other}"
                            )
        return self

    # -- lookups (derived once; the snapshot is immutable) ------------------------------

    @cached_property
    def node_by_name(self) -> dict[str, Node]:
        return {n.name: n for n in self.nodes}

    @cached_property
    def job_by_id(self) -> dict[str, Job]:
        return {j.id: j for j in self.jobs}

    def topology_of(self, node: Node) -> GpuTopology:
        """The node's topology; nodes without one have no NVLink.

        In a live snapshot such a GPU node is *unknown* (named ``unknown``): it is still
        modelled without NVLink, which is the safe side (no NVLink job is placed or planned
        on it), but every view says "unknown" instead of calling it PCIe.
        """
        if node.topology is not None:
            return self.topologies.get(node.topology) or BUILTIN_TOPOLOGIES[node.topology]
        if self.topology_unknown(node):
            return _unknown_default(node.gpu_count)
        return _pcie_default(node.gpu_count)

    def topology_unknown(self, node: Node) -> bool:
        """True for a multi-GPU node of a live snapshot that no topology source covered
        (one GPU is a block of one whatever its wiring: nothing to know)."""
        return node.gpu_count > 1 and node.topology is None and self.source in LIVE_SOURCES

    @cached_property
    def unknown_topology_nodes(self) -> tuple[str, ...]:
        """GPU nodes whose topology is unknown (snapshot order)."""
        return tuple(n.name for n in self.nodes if self.topology_unknown(n))

    def topology_sources(self) -> dict[str, tuple[str, ...]]:
        """Source -> GPU nodes it gave a topology to; ``"unknown"`` for the uncovered ones.

        Nodes of file or simulator snapshots without a recorded source are under
        ``"snapshot"`` (the file stated their topology). For ``doctor`` and the metrics.
        """
        out: dict[str, list[str]] = {}
        for n in self.nodes:
            if not n.gpu_count:
                continue
            if n.topology_source is not None:
                key: str = n.topology_source
            elif self.topology_unknown(n):
                key = UNKNOWN_TOPOLOGY
            else:
                key = "snapshot"
            out.setdefault(key, []).append(n.name)
        return {k: tuple(v) for k, v in sorted(out.items())}

    @cached_property
    def shards_per_gpu(self) -> int | None:
        """Shards per GPU on the nodes that share GPUs (``Gres=shard:N`` over the GPUs),
        the most common value when nodes differ; None when no node has shards."""
        counts: dict[int, int] = {}
        for n in self.nodes:
            if n.shards and n.gpu_count:
                per_gpu = n.shards // n.gpu_count
                counts[per_gpu] = counts.get(per_gpu, 0) + 1
        return max(counts, key=lambda k: (counts[k], k)) if counts else None

    @cached_property
    def gpu_owners(self) -> dict[str, tuple[str | None, ...]]:
        """node -> owner job id per GPU index (None = free, UNKNOWN_OWNER = busy, no job)."""
        owners: dict[str, list[str | None]] = {
            n.name: [UNKNOWN_OWNER if i in n.gpus_used else None for i in range(n.gpu_count)]
            for n in self.nodes
        }
        for job in self.jobs:
            if not job.holds_gpus:
                continue
            for node_name, idx in job.gpus.items():
                for g in idx:
                    owners[node_name][g] = job.id
        return {k: tuple(v) for k, v in owners.items()}

    @cached_property
    def free_masks(self) -> dict[str, int]:
        """node -> bit mask of free GPUs (neither held by a job nor reported busy)."""
        return {
            name: mask_of(i for i, o in enumerate(owners) if o is None)
            for name, owners in self.gpu_owners.items()
        }

    def running_gpu_jobs(self) -> Iterator[Job]:
        return (j for j in self.jobs if j.holds_gpus)

    def pending_gpu_jobs(self) -> Iterator[Job]:
        """Pending jobs asking for GPUs (an unreadable job asks for nothing: never here)."""
        return (j for j in self.jobs if j.state == JobState.PENDING and j.request is not None)

    def unreadable_parts(self) -> dict[RecordPart, int]:
        """Job records of this read a reader could not understand, by part (kept and left
        out alike): the figures of ``slurm_defrag_unreadable_jobs_total``."""
        out: dict[RecordPart, int] = {}
        reasons = (*(j.unreadable for j in self.jobs if j.unreadable), *self.left_out)
        for reason in reasons:
            part = reason_part(reason)
            out[part] = out.get(part, 0) + 1
        return out

    def domain_of(self, node: Node) -> NvlinkDomain | None:
        if node.nvlink_domain is None:
            return None
        return next((d for d in self.nvlink_domains if d.name == node.nvlink_domain), None)


def _pcie_default(n: int) -> GpuTopology:
    from slurm_defrag.domain.topology import pcie_only

    key = f"pcie-1x{n}"
    cached = _PCIE_CACHE.get(key)
    if cached is None:
        cached = _PCIE_CACHE[key] = pcie_only(max(n, 1), 1, name=key)
    return cached


_PCIE_CACHE: dict[str, GpuTopology] = {}


def _unknown_default(n: int) -> GpuTopology:
    cached = _UNKNOWN_CACHE.get(n)
    if cached is None:
        cached = _UNKNOWN_CACHE[n] = GpuTopology(
            name=UNKNOWN_TOPOLOGY,
            gpu_count=max(n, 1),
            description="NVLink topology not discovered: modelled without NVLink "
            "(set gres_conf, topology_map or topology_dir)",
        )
    return cached


_UNKNOWN_CACHE: dict[int, GpuTopology] = {}


def is_unknown(topo: GpuTopology) -> bool:
    """True for the stand-in topology of an unknown node (see ``topology_of``)."""
    return topo.name == UNKNOWN_TOPOLOGY
