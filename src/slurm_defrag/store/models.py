"""Tables of the persistence layer (SQLAlchemy 2.0 typed ORM).

Snapshots are stored as *intervals*: a node, job, GPU allocation or per-node metric row is
written when it first appears or changes, carries the id of the snapshot it became true in
(``from_snapshot``) and is closed by the id of the first snapshot it no longer holds in
(``to_snapshot``, NULL while current). A cluster where a few jobs start and end each minute
therefore writes a few dozen rows per snapshot instead of thousands. See
``docs/persistence.md`` for the whole design and the retention rules.

Interval bounds are plain integers, not foreign keys: retention deletes old snapshots while
an interval that started before them is still valid for the snapshots that remain.

Times used in arithmetic (metric intervals, time series, rollups) are seconds since the
epoch in ``Double`` columns: SQLite has no timestamp type, and epoch numbers let the history
queries compute overlaps in portable SQL. Human-facing times are timezone-aware DateTimes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    DateTime,
    Dialect,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

# Fixed constraint names: Alembic can then drop/alter them identically on every backend.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

PLAN_MODES = ("dry-run", "enforce")
PLAN_STATUSES = ("open", "applying", "done", "failed", "aborted")
OPEN_PLAN_STATUSES = ("open", "applying")
"""A plan in one of these states pins the snapshot it was made from (retention keeps it)."""
STEP_STATES = ("pending", "running", "done", "failed", "skipped")


class UtcDateTime(TypeDecorator[datetime]):
    """Aware datetimes in, aware UTC datetimes out, on every backend.

    SQLite stores DateTime as text without an offset; normalising to UTC on the way in and
    re-attaching UTC on the way out keeps comparisons and arithmetic correct everywhere.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _checked(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: UtcDateTime(),
        dict[str, Any]: JSON(),
        list[str]: JSON(),
    }


# -- snapshots ---------------------------------------------------------------------------


class SnapshotConfig(Base):
    """Topologies, partitions, reservations, NVLink domains: content-addressed, shared.

    They change far less often than once a minute, so each distinct body is stored once and
    snapshots point at it by hash.
    """

    __tablename__ = "snapshot_configs"

    hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    body: Mapped[str] = mapped_column(Text)


class Snapshot(Base):
    __tablename__ = "snapshots"
    # Ids must only grow: intervals say "valid from snapshot N on". SQLite would otherwise
    # hand out max(id)+1 again after retention deleted the newest rows.
    __table_args__ = (
        Index("ix_snapshots_cluster_t", "cluster", "t"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster: Mapped[str] = mapped_column(String(128))
    taken_at: Mapped[datetime]
    tz_offset_s: Mapped[int | None] = mapped_column(
        Integer, comment="UTC offset of the original taken_at; NULL = it was naive"
    )
    t: Mapped[float] = mapped_column(Double, comment="taken_at as epoch seconds")
    source: Mapped[str] = mapped_column(String(32))
    schema_version: Mapped[int] = mapped_column(SmallInteger)
    config_hash: Mapped[str] = mapped_column(ForeignKey("snapshot_configs.hash"))
    node_order: Mapped[list[str] | None] = mapped_column(
        comment="node names in snapshot order; NULL = natural sort order (the usual case)"
    )
    job_order: Mapped[list[str] | None] = mapped_column(
        comment="job ids in snapshot order; NULL = natural sort order (the usual case)"
    )
    nodes: Mapped[int] = mapped_column(Integer)
    jobs: Mapped[int] = mapped_column(Integer)
    saved_at: Mapped[datetime] = mapped_column(default=lambda: datetime.now(UTC))
    mode: Mapped[str | None] = mapped_column(
        String(16),
        comment="the service's mode when it stored this snapshot (off, dry-run, enforce); "
        "NULL: stored by a command, or before revision 0003",
    )


class NodeRef(Base):
    """A node name of a cluster, so interval rows carry a small integer, not the name."""

    __tablename__ = "nodes"
    __table_args__ = (UniqueConstraint("cluster", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster: Mapped[str] = mapped_column(String(128))
    name: Mapped[str] = mapped_column(String(256))


class NodeState(Base):
    """One version of a node (the full Node JSON) and the snapshots it was valid for."""

    __tablename__ = "node_states"
    __table_args__ = (Index("ix_node_states_open", "node_id", "to_snapshot"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id"))
    from_snapshot: Mapped[int] = mapped_column(Integer, index=True)
    to_snapshot: Mapped[int | None] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(256), comment="flags joined by '+', for queries")
    gpus_used: Mapped[int] = mapped_column(SmallInteger)
    body: Mapped[str] = mapped_column(Text)


class JobRef(Base):
    """Every job ever seen, once: identity and first sighting ("jobs seen")."""

    __tablename__ = "jobs"
    __table_args__ = (UniqueConstraint("cluster", "job_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster: Mapped[str] = mapped_column(String(128))
    job_id: Mapped[str] = mapped_column(String(64))
    user: Mapped[str] = mapped_column(String(128))
    account: Mapped[str] = mapped_column(String(128))
    first_snapshot: Mapped[int] = mapped_column(Integer)
    first_seen_at: Mapped[datetime]


class JobState(Base):
    """One version of a job (the full Job JSON) and the snapshots it was valid for."""

    __tablename__ = "job_states"
    __table_args__ = (Index("ix_job_states_open", "job_ref", "to_snapshot"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_ref: Mapped[int] = mapped_column(ForeignKey("jobs.id"))
    from_snapshot: Mapped[int] = mapped_column(Integer, index=True)
    to_snapshot: Mapped[int | None] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(32))
    body: Mapped[str] = mapped_column(Text)


class GpuAllocation(Base):
    """GPU ``gpu_index`` of a node held by a job, over an interval of snapshots.

    Derived from the jobs (which also carry it), stored so that "who held this GPU" is a
    single indexed query.
    """

    __tablename__ = "gpu_allocations"
    __table_args__ = (
        Index("ix_gpu_allocations_open", "node_id", "gpu_index", "to_snapshot"),
        # Revision 0003: "valid after snapshot N" for a slice of time (strand.sweep).
        Index("ix_gpu_allocations_to_snapshot", "to_snapshot"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id"))
    gpu_index: Mapped[int] = mapped_column(SmallInteger)
    job_ref: Mapped[int] = mapped_column(ForeignKey("jobs.id"), index=True)
    from_snapshot: Mapped[int] = mapped_column(Integer, index=True)
    to_snapshot: Mapped[int | None] = mapped_column(Integer)


class JobRun(Base):
    """One start of a GPU job: who ran what, asked when, started when (revision 0003).

    Written by the snapshot writer when a job is first seen holding GPUs, and again each
    time it starts after a requeue. A few dozen bytes per start, kept as long as the hourly
    rollups (not the snapshots), so waits and the jobs that occupied a node are still known
    when the job's states are pruned. ``job_ref`` is a plain integer: the identity row it
    names may be pruned first.
    """

    __tablename__ = "job_runs"
    __table_args__ = (
        # covers the impact report's waits: what it reads of a month of starts, in order
        Index("ix_job_runs_waits", "cluster", "run", "start_t", "submit_t", "gpus"),
        Index("ix_job_runs_job_ref", "job_ref"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster: Mapped[str] = mapped_column(String(128))
    job_id: Mapped[str] = mapped_column(String(64))
    job_ref: Mapped[int] = mapped_column(Integer, comment="jobs.id while that row is kept")
    run: Mapped[int] = mapped_column(
        SmallInteger, comment="0: the first start this database saw; 1, 2, ...: after requeues"
    )
    user: Mapped[str] = mapped_column(String(128))
    account: Mapped[str] = mapped_column(String(128))
    partition: Mapped[str] = mapped_column(String(256))
    qos: Mapped[str] = mapped_column(String(128))
    gpus: Mapped[int] = mapped_column(Integer)
    nodes: Mapped[int] = mapped_column(Integer)
    gpus_per_node: Mapped[int] = mapped_column(SmallInteger, comment="the most on one node")
    time_limit_s: Mapped[int | None] = mapped_column(Integer, comment="NULL: unlimited")
    submit_t: Mapped[float | None] = mapped_column(Double, comment="Slurm's SubmitTime")
    start_t: Mapped[float] = mapped_column(
        Double, comment="Slurm's StartTime; the snapshot's time when Slurm gave none"
    )
    seen_t: Mapped[float] = mapped_column(Double, comment="first snapshot showing it running")
    seen_pending: Mapped[bool] = mapped_column(
        Boolean, comment="a snapshot saw it pending before this start"
    )
    requeued_t: Mapped[float | None] = mapped_column(
        Double, comment="run > 0: when a snapshot first saw it back in the queue"
    )


# -- metrics -----------------------------------------------------------------------------


class NodeMetric(Base):
    """Per-node fragmentation figures over an interval of snapshots.

    FGD is left out on purpose: it is weighted by the pending mix and so changes on every
    node whenever the queue changes, which would defeat the interval storage. The counts kept
    here change only when the node's free GPUs or the set of requested shapes change.
    """

    __tablename__ = "node_metrics"
    __table_args__ = (
        Index("ix_node_metrics_open", "node_id", "to_snapshot"),
        Index("ix_node_metrics_from_t", "from_t"),
        Index("ix_node_metrics_to_t", "to_t"),  # revision 0003, as above
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id"))
    from_snapshot: Mapped[int] = mapped_column(Integer)
    to_snapshot: Mapped[int | None] = mapped_column(Integer)
    from_t: Mapped[float] = mapped_column(Double)
    to_t: Mapped[float | None] = mapped_column(Double)
    partitions: Mapped[str] = mapped_column(String(512), comment="',a,b,' for LIKE filters")
    available: Mapped[bool] = mapped_column(Boolean)
    free: Mapped[int] = mapped_column(SmallInteger)
    free_memory_gb: Mapped[float] = mapped_column(Double)
    unusable: Mapped[int] = mapped_column(SmallInteger)
    unusable_spatial: Mapped[int] = mapped_column(SmallInteger)
    unusable_topology: Mapped[int] = mapped_column(SmallInteger)
    unusable_configuration: Mapped[int] = mapped_column(SmallInteger)
    unusable_memory_gb: Mapped[float] = mapped_column(Double)
    largest_free_block: Mapped[int] = mapped_column(SmallInteger)


class GroupMetric(Base):
    """Cluster, partition and GPU-model figures of one snapshot, with pending-job counts."""

    __tablename__ = "group_metrics"
    __table_args__ = (Index("ix_group_metrics_series", "cluster", "scope", "name", "t"),)

    snapshot_id: Mapped[int] = mapped_column(
        ForeignKey("snapshots.id", ondelete="CASCADE"), primary_key=True
    )
    scope: Mapped[str] = mapped_column(String(16), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    cluster: Mapped[str] = mapped_column(String(128))
    t: Mapped[float] = mapped_column(Double)
    nodes: Mapped[int] = mapped_column(Integer)
    gpus: Mapped[int] = mapped_column(Integer)
    used: Mapped[int] = mapped_column(Integer)
    free: Mapped[int] = mapped_column(Integer)
    free_unavailable: Mapped[int] = mapped_column(Integer)
    free_memory_gb: Mapped[float] = mapped_column(Double)
    unusable: Mapped[int] = mapped_column(Integer)
    unusable_memory_gb: Mapped[float] = mapped_column(Double)
    fgd: Mapped[float] = mapped_column(Double)
    largest_free_block: Mapped[int] = mapped_column(SmallInteger)
    pending: Mapped[int] = mapped_column(Integer)
    falsely_starved: Mapped[int] = mapped_column(Integer)
    short: Mapped[int] = mapped_column(Integer)
    # Revision 0003: the cause split of ``unusable`` and the GPUs the falsely starved jobs
    # ask for, so the impact report reads them per snapshot (NULL in older rows).
    unusable_spatial: Mapped[int | None] = mapped_column(Integer)
    unusable_topology: Mapped[int | None] = mapped_column(Integer)
    unusable_configuration: Mapped[int | None] = mapped_column(Integer)
    falsely_starved_gpus: Mapped[int | None] = mapped_column(
        Integer, comment="GPUs the falsely starved jobs ask for; NULL: before revision 0003"
    )


class GroupMetricHourly(Base):
    """Hourly rollup of :class:`GroupMetric`, kept long after the snapshots are pruned."""

    __tablename__ = "group_metrics_hourly"

    cluster: Mapped[str] = mapped_column(String(128), primary_key=True)
    scope: Mapped[str] = mapped_column(String(16), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    hour_t: Mapped[float] = mapped_column(Double, primary_key=True)
    samples: Mapped[int] = mapped_column(Integer)
    gpus: Mapped[float] = mapped_column(Double, comment="averages over the samples")
    free: Mapped[float] = mapped_column(Double)
    free_memory_gb: Mapped[float] = mapped_column(Double)
    unusable: Mapped[float] = mapped_column(Double)
    unusable_memory_gb: Mapped[float] = mapped_column(Double)
    fgd: Mapped[float] = mapped_column(Double)
    pending: Mapped[float] = mapped_column(Double)
    falsely_starved: Mapped[float] = mapped_column(Double)
    max_unusable: Mapped[int] = mapped_column(Integer)
    max_falsely_starved: Mapped[int] = mapped_column(Integer)
    unusable_spatial: Mapped[float | None] = mapped_column(Double)
    unusable_topology: Mapped[float | None] = mapped_column(Double)
    unusable_configuration: Mapped[float | None] = mapped_column(Double)
    falsely_starved_gpus: Mapped[float | None] = mapped_column(
        Double, comment="NULL: an hour with samples stored before revision 0003"
    )


class NodeMetricHourly(Base):
    """Hourly rollup of :class:`NodeMetric` intervals (seconds observed and GPU-seconds)."""

    __tablename__ = "node_metrics_hourly"
    __table_args__ = (Index("ix_node_metrics_hourly_hour_t", "hour_t"),)

    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id"), primary_key=True)
    hour_t: Mapped[float] = mapped_column(Double, primary_key=True)
    partitions: Mapped[str] = mapped_column(String(512))
    seconds: Mapped[float] = mapped_column(Double)
    unusable_seconds: Mapped[float] = mapped_column(
        Double, comment="seconds with at least one free GPU that no pending shape could use"
    )
    unusable_gpu_seconds: Mapped[float] = mapped_column(Double)
    unusable_memory_gb_seconds: Mapped[float] = mapped_column(Double)
    free_gpu_seconds: Mapped[float] = mapped_column(Double)
    max_unusable: Mapped[int] = mapped_column(SmallInteger)


class StrandHourly(Base):
    """Stranded GPU-seconds of one hour, by cause, charged to what held the nodes (0003).

    One row per hour, dimension (``headline``, ``lifecycle``, ``shape``, ``policy``,
    ``node_type``, ``account``, ``user``) and key (that dimension's values, as JSON): each
    hour's charges are stored once under every dimension; see
    :mod:`slurm_defrag.store.strand` for the rule and the keys. Written by the snapshot
    writer for each complete hour, kept as long as the hourly rollups.
    """

    __tablename__ = "strand_hourly"
    __table_args__ = (
        Index("ix_strand_hourly_cluster_dimension_hour_t", "cluster", "dimension", "hour_t"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster: Mapped[str] = mapped_column(String(128))
    hour_t: Mapped[float] = mapped_column(Double)
    dimension: Mapped[str] = mapped_column(String(16))
    key: Mapped[str] = mapped_column(Text, comment="the dimension's values, a JSON list")
    spatial_gpu_s: Mapped[float] = mapped_column(Double)
    topology_gpu_s: Mapped[float] = mapped_column(Double)
    configuration_gpu_s: Mapped[float] = mapped_column(Double)


class StrandProgress(Base):
    """Per cluster: every hour before ``until_t`` is in ``strand_hourly``."""

    __tablename__ = "strand_progress"

    cluster: Mapped[str] = mapped_column(String(128), primary_key=True)
    until_t: Mapped[float] = mapped_column(Double)


class RollupProgress(Base):
    """Per cluster: everything before ``rolled_until_t`` lives in the hourly tables."""

    __tablename__ = "rollup_progress"

    cluster: Mapped[str] = mapped_column(String(128), primary_key=True)
    rolled_until_t: Mapped[float] = mapped_column(Double)


# -- plans and actions -------------------------------------------------------------------


class Plan(Base):
    __tablename__ = "plans"
    __table_args__ = (
        CheckConstraint(_checked("mode", PLAN_MODES), name="mode"),
        CheckConstraint(_checked("status", PLAN_STATUSES), name="status"),
        Index("ix_plans_status", "status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster: Mapped[str] = mapped_column(String(128))
    # RESTRICT: a snapshot an existing plan was made from is never deleted underneath it.
    snapshot_id: Mapped[int | None] = mapped_column(
        ForeignKey("snapshots.id", ondelete="RESTRICT"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(default=lambda: datetime.now(UTC))
    mode: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), default="open")
    inputs: Mapped[dict[str, Any]] = mapped_column(comment="policy, settings, solver limits")
    solver_status: Mapped[str | None] = mapped_column(String(32))
    objective: Mapped[float | None] = mapped_column(Double)
    bound: Mapped[float | None] = mapped_column(Double)
    solve_time_s: Mapped[float | None] = mapped_column(Double)
    holder: Mapped[str | None] = mapped_column(String(256), comment="lease holder that made it")
    closed_at: Mapped[datetime | None]
    note: Mapped[str] = mapped_column(Text, default="")


class PlanStep(Base):
    __tablename__ = "plan_steps"
    __table_args__ = (
        UniqueConstraint("plan_id", "seq"),
        CheckConstraint(_checked("state", STEP_STATES), name="state"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    plan_id: Mapped[int] = mapped_column(ForeignKey("plans.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    action: Mapped[str] = mapped_column(String(32))
    target: Mapped[str] = mapped_column(String(256))
    args: Mapped[dict[str, Any]]
    state: Mapped[str] = mapped_column(String(16), default="pending")
    error: Mapped[str] = mapped_column(Text, default="")
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]


class SlurmCommand(Base):
    """Every Slurm command issued, with what it printed and how long it took."""

    __tablename__ = "slurm_commands"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    plan_id: Mapped[int | None] = mapped_column(
        ForeignKey("plans.id", ondelete="CASCADE"), index=True
    )
    step_id: Mapped[int | None] = mapped_column(ForeignKey("plan_steps.id", ondelete="CASCADE"))
    started_at: Mapped[datetime] = mapped_column(index=True)
    argv: Mapped[list[str]]
    # NULL also when not executed (a dry-run preview): see ``executed``.
    exit_code: Mapped[int | None] = mapped_column(Integer, comment="NULL: did not run/timed out")
    stdout: Mapped[str] = mapped_column(Text, default="")
    stderr: Mapped[str] = mapped_column(Text, default="")
    duration_s: Mapped[float] = mapped_column(Double)
    dry_run: Mapped[bool] = mapped_column(Boolean, default=False)
    executed: Mapped[bool] = mapped_column(
        Boolean, default=True, server_default=true(),
        comment="false: a dry-run preview, never sent to Slurm",
    )  # fmt: skip


# -- coordination ------------------------------------------------------------------------


class LeaseRow(Base):
    """The leader lease: one row per lease name; ``epoch`` grows on every change of holder.

    Times are epoch seconds of the database's clock on PostgreSQL (hosts may disagree) and
    of the local clock on SQLite (one host by construction).
    """

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str] = mapped_column(String(256))
    epoch: Mapped[int] = mapped_column(Integer)
    acquired_at: Mapped[float] = mapped_column(Double)
    expires_at: Mapped[float] = mapped_column(Double)
