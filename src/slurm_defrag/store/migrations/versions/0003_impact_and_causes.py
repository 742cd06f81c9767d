"""What the impact and causes reports read: job runs, the mode, unusable GPUs by cause.

* ``job_runs``: one row per start of a GPU job (who, what shape, submitted and started
  when), kept as long as the hourly rollups. Upgrading fills it from the job versions the
  database still holds (a week by default), so the reports have that much at once.
* ``snapshots.mode``: the service's mode when it stored the snapshot; where it switched
  from dry-run to enforce is the impact report's default change point.
* ``group_metrics`` (and the hourly rollup): unusable GPUs by cause and the GPUs the
  falsely starved jobs ask for. Older rows keep NULL: recomputing them would mean a
  metrics pass per stored snapshot.
* ``strand_hourly`` / ``strand_progress``: stranded GPU-seconds per hour charged to the
  jobs holding the nodes. The snapshot writer fills the hours the database still holds
  in full, a day of them per snapshot saved, after the upgrade.
* indexes on the interval ends (``node_metrics.to_t``, ``gpu_allocations.to_snapshot``):
  reading one hour of intervals without scanning the month before it.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-08 10:00:00
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_GROUP_COLUMNS = ("unusable_spatial", "unusable_topology", "unusable_configuration")
# The job states in which a job holds its GPUs (domain.cluster.HOLDS_GPUS as of this
# revision; a migration never imports the code it migrates for).
_HOLDS = frozenset({"RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "STOPPED"})

_job_runs = sa.table(
    "job_runs",
    *(
        sa.column(c)
        for c in ("cluster", "job_id", "job_ref", "run", "user", "account", "partition", "qos",
                  "gpus", "nodes", "gpus_per_node", "time_limit_s", "submit_t", "start_t",
                  "seen_t", "seen_pending", "requeued_t")
    ),
)  # fmt: skip


def upgrade() -> None:
    _add_columns()
    _create_job_runs()
    _create_strands()
    _index_interval_ends()
    _backfill_runs(op.get_bind())


def _add_columns() -> None:
    """The snapshots' service mode and the group metrics' new columns."""
    with op.batch_alter_table("snapshots") as batch:
        batch.add_column(
            sa.Column(
                "mode",
                sa.String(length=16),
                nullable=True,
                comment="the service's mode when it stored this snapshot (off, dry-run, "
                "enforce); NULL: stored by a command, or before revision 0003",
            )
        )
    with op.batch_alter_table("group_metrics") as batch:
        for name in _GROUP_COLUMNS:
            batch.add_column(sa.Column(name, sa.Integer(), nullable=True))
        batch.add_column(
            sa.Column(
                "falsely_starved_gpus",
                sa.Integer(),
                nullable=True,
                comment="GPUs the falsely starved jobs ask for; NULL: before revision 0003",
            )
        )
    with op.batch_alter_table("group_metrics_hourly") as batch:
        for name in _GROUP_COLUMNS:
            batch.add_column(sa.Column(name, sa.Double(), nullable=True))
        batch.add_column(
            sa.Column(
                "falsely_starved_gpus",
                sa.Double(),
                nullable=True,
                comment="NULL: an hour with samples stored before revision 0003",
            )
        )


def _create_job_runs() -> None:
    """The ``job_runs`` table and its indexes."""
    op.create_table(
        "job_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster", sa.String(length=128), nullable=False),
        sa.Column("job_id", sa.String(length=64), nullable=False),
        sa.Column(
            "job_ref", sa.Integer(), nullable=False, comment="jobs.id while that row is kept"
        ),
        sa.Column(
            "run",
            sa.SmallInteger(),
            nullable=False,
            comment="0: the first start this database saw; 1, 2, ...: after requeues",
        ),
        sa.Column("user", sa.String(length=128), nullable=False),
        sa.Column("account", sa.String(length=128), nullable=False),
        sa.Column("partition", sa.String(length=256), nullable=False),
        sa.Column("qos", sa.String(length=128), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("nodes", sa.Integer(), nullable=False),
        sa.Column(
            "gpus_per_node", sa.SmallInteger(), nullable=False, comment="the most on one node"
        ),
        sa.Column("time_limit_s", sa.Integer(), nullable=True, comment="NULL: unlimited"),
        sa.Column("submit_t", sa.Double(), nullable=True, comment="Slurm's SubmitTime"),
        sa.Column(
            "start_t",
            sa.Double(),
            nullable=False,
            comment="Slurm's StartTime; the snapshot's time when Slurm gave none",
        ),
        sa.Column(
            "seen_t", sa.Double(), nullable=False, comment="first snapshot showing it running"
        ),
        sa.Column(
            "seen_pending",
            sa.Boolean(),
            nullable=False,
            comment="a snapshot saw it pending before this start",
        ),
        sa.Column(
            "requeued_t",
            sa.Double(),
            nullable=True,
            comment="run > 0: when a snapshot first saw it back in the queue",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_runs")),
    )
    op.create_index(
        "ix_job_runs_waits",
        "job_runs",
        ["cluster", "run", "start_t", "submit_t", "gpus"],
        unique=False,
    )
    op.create_index("ix_job_runs_job_ref", "job_runs", ["job_ref"], unique=False)


def _create_strands() -> None:
    """The strand tables (hourly rollups and progress) and their indexes."""
    op.create_table(
        "strand_hourly",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster", sa.String(length=128), nullable=False),
        sa.Column("hour_t", sa.Double(), nullable=False),
        sa.Column("dimension", sa.String(length=16), nullable=False),
        sa.Column("key", sa.Text(), nullable=False, comment="the dimension's values, a JSON list"),
        sa.Column("spatial_gpu_s", sa.Double(), nullable=False),
        sa.Column("topology_gpu_s", sa.Double(), nullable=False),
        sa.Column("configuration_gpu_s", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_strand_hourly")),
    )
    op.create_index(
        "ix_strand_hourly_cluster_dimension_hour_t",
        "strand_hourly",
        ["cluster", "dimension", "hour_t"],
        unique=False,
    )
    op.create_table(
        "strand_progress",
        sa.Column("cluster", sa.String(length=128), nullable=False),
        sa.Column("until_t", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("cluster", name=op.f("pk_strand_progress")),
    )


def _index_interval_ends() -> None:
    """Indexes on where intervals end (the open ones are looked up by it)."""
    op.create_index("ix_node_metrics_to_t", "node_metrics", ["to_t"], unique=False)
    op.create_index(
        "ix_gpu_allocations_to_snapshot", "gpu_allocations", ["to_snapshot"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_gpu_allocations_to_snapshot", table_name="gpu_allocations")
    op.drop_index("ix_node_metrics_to_t", table_name="node_metrics")
    op.drop_table("strand_progress")
    op.drop_index("ix_strand_hourly_cluster_dimension_hour_t", table_name="strand_hourly")
    op.drop_table("strand_hourly")
    op.drop_index("ix_job_runs_job_ref", table_name="job_runs")
    op.drop_index("ix_job_runs_waits", table_name="job_runs")
    op.drop_table("job_runs")
    with op.batch_alter_table("group_metrics_hourly") as batch:
        for name in (*_GROUP_COLUMNS, "falsely_starved_gpus"):
            batch.drop_column(name)
    with op.batch_alter_table("group_metrics") as batch:
        for name in (*_GROUP_COLUMNS, "falsely_starved_gpus"):
            batch.drop_column(name)
    with op.batch_alter_table("snapshots") as batch:
        batch.drop_column("mode")


# -- filling job_runs from the job versions kept -----------------------------------------


def _backfill_runs(conn: sa.Connection) -> None:
    """One row per start the stored job versions show, in batches.

    The versions of a job are read in order; a version holding GPUs after one that did not
    (or as the first one) is a start. A body that does not read is skipped: the reports
    then simply lack that job.
    """
    js = sa.table("job_states", *(sa.column(c) for c in ("job_ref", "from_snapshot", "state",
                                                          "body", "id")))  # fmt: skip
    jobs = sa.table("jobs", *(sa.column(c) for c in ("id", "cluster", "job_id")))
    snaps = sa.table("snapshots", sa.column("id"), sa.column("t"))
    rows = conn.execute(
        sa.select(jobs.c.id, jobs.c.cluster, jobs.c.job_id, js.c.state, js.c.body, snaps.c.t)
        .select_from(
            js.join(jobs, jobs.c.id == js.c.job_ref).outerjoin(
                snaps, snaps.c.id == js.c.from_snapshot
            )
        )
        .order_by(js.c.job_ref, js.c.from_snapshot, js.c.id)
    )
    batch: list[dict[str, Any]] = []
    for row in _starts(rows):
        batch.append(row)
        if len(batch) >= 5000:
            conn.execute(sa.insert(_job_runs), batch)
            batch = []
    if batch:
        conn.execute(sa.insert(_job_runs), batch)


def _starts(rows: Any) -> Iterator[dict[str, Any]]:
    ref = None
    holding = seen = False
    run = 0
    back_at: float | None = None
    for job_ref, cluster, job_id, state, body, t in rows:
        if job_ref != ref:
            ref, holding, seen, run, back_at = job_ref, False, False, 0, None
        try:
            data = json.loads(body)
            gpus = {str(k): len(v) for k, v in (data.get("gpus") or {}).items() if v}
        except (ValueError, TypeError, AttributeError):
            continue
        holds = state in _HOLDS and bool(gpus)
        if holds and not holding:
            start = _epoch(data.get("start_time"))
            when = t if t is not None else start
            if when is not None:
                yield {
                    "cluster": cluster, "job_id": job_id, "job_ref": job_ref, "run": run,
                    "user": str(data.get("user") or ""), "account": str(data.get("account") or ""),
                    "partition": str(data.get("partition") or ""),
                    "qos": str(data.get("qos") or ""), "gpus": sum(gpus.values()),
                    "nodes": len(gpus), "gpus_per_node": max(gpus.values()),
                    "time_limit_s": data.get("time_limit_s"),
                    "submit_t": _epoch(data.get("submit_time")),
                    "start_t": start if start is not None else when, "seen_t": when,
                    "seen_pending": seen, "requeued_t": back_at if run else None,
                }  # fmt: skip
                run += 1
        elif not holds and (holding or not seen) and t is not None:
            back_at = t  # first seen waiting (again)
        seen = seen or not holds
        holding = holds


def _epoch(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
