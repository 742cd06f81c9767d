"""Initial schema: snapshots as intervals, metrics, rollups, plans, commands, lease.

Revision ID: 0001
Revises:
Create Date: 2026-11-29 15:34:30.124765
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    _create_group_metrics_hourly()
    _create_jobs()
    _create_leases()
    _create_nodes()
    _create_rollup_progress()
    _create_snapshot_configs()
    _create_gpu_allocations()
    _create_job_states()
    _create_node_metrics()
    _create_node_metrics_hourly()
    _create_node_states()
    _create_snapshots()
    _create_group_metrics()
    _create_plans()
    _create_plan_steps()
    _create_slurm_commands()


def _create_group_metrics_hourly() -> None:
    """The ``group_metrics_hourly`` table and its indexes."""
    op.create_table(
        "group_metrics_hourly",
        sa.Column("cluster", sa.String(length=128), nullable=False),
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("hour_t", sa.Double(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("gpus", sa.Double(), nullable=False, comment="averages over the samples"),
        sa.Column("free", sa.Double(), nullable=False),
        sa.Column("free_memory_gb", sa.Double(), nullable=False),
        sa.Column("unusable", sa.Double(), nullable=False),
        sa.Column("unusable_memory_gb", sa.Double(), nullable=False),
        sa.Column("fgd", sa.Double(), nullable=False),
        sa.Column("pending", sa.Double(), nullable=False),
        sa.Column("falsely_starved", sa.Double(), nullable=False),
        sa.Column("max_unusable", sa.Integer(), nullable=False),
        sa.Column("max_falsely_starved", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "cluster", "scope", "name", "hour_t", name=op.f("pk_group_metrics_hourly")
        ),
    )


def _create_jobs() -> None:
    """The ``jobs`` table and its indexes."""
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster", sa.String(length=128), nullable=False),
        sa.Column("job_id", sa.String(length=64), nullable=False),
        sa.Column("user", sa.String(length=128), nullable=False),
        sa.Column("account", sa.String(length=128), nullable=False),
        sa.Column("first_snapshot", sa.Integer(), nullable=False),
        sa.Column("first_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        sa.UniqueConstraint("cluster", "job_id", name=op.f("uq_jobs_cluster_job_id")),
    )


def _create_leases() -> None:
    """The ``leases`` table and its indexes."""
    op.create_table(
        "leases",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("holder", sa.String(length=256), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("acquired_at", sa.Double(), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_leases")),
    )


def _create_nodes() -> None:
    """The ``nodes`` table and its indexes."""
    op.create_table(
        "nodes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster", sa.String(length=128), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_nodes")),
        sa.UniqueConstraint("cluster", "name", name=op.f("uq_nodes_cluster_name")),
    )


def _create_rollup_progress() -> None:
    """The ``rollup_progress`` table and its indexes."""
    op.create_table(
        "rollup_progress",
        sa.Column("cluster", sa.String(length=128), nullable=False),
        sa.Column("rolled_until_t", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("cluster", name=op.f("pk_rollup_progress")),
    )


def _create_snapshot_configs() -> None:
    """The ``snapshot_configs`` table and its indexes."""
    op.create_table(
        "snapshot_configs",
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("hash", name=op.f("pk_snapshot_configs")),
    )


def _create_gpu_allocations() -> None:
    """The ``gpu_allocations`` table and its indexes."""
    op.create_table(
        "gpu_allocations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("gpu_index", sa.SmallInteger(), nullable=False),
        sa.Column("job_ref", sa.Integer(), nullable=False),
        sa.Column("from_snapshot", sa.Integer(), nullable=False),
        sa.Column("to_snapshot", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_ref"], ["jobs.id"], name=op.f("fk_gpu_allocations_job_ref_jobs")
        ),
        sa.ForeignKeyConstraint(
            ["node_id"], ["nodes.id"], name=op.f("fk_gpu_allocations_node_id_nodes")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gpu_allocations")),
    )
    op.create_index(
        op.f("ix_gpu_allocations_from_snapshot"), "gpu_allocations", ["from_snapshot"], unique=False
    )
    op.create_index(
        op.f("ix_gpu_allocations_job_ref"), "gpu_allocations", ["job_ref"], unique=False
    )
    op.create_index(
        "ix_gpu_allocations_open",
        "gpu_allocations",
        ["node_id", "gpu_index", "to_snapshot"],
        unique=False,
    )


def _create_job_states() -> None:
    """The ``job_states`` table and its indexes."""
    op.create_table(
        "job_states",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_ref", sa.Integer(), nullable=False),
        sa.Column("from_snapshot", sa.Integer(), nullable=False),
        sa.Column("to_snapshot", sa.Integer(), nullable=True),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["job_ref"], ["jobs.id"], name=op.f("fk_job_states_job_ref_jobs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_states")),
    )
    op.create_index(
        op.f("ix_job_states_from_snapshot"), "job_states", ["from_snapshot"], unique=False
    )
    op.create_index("ix_job_states_open", "job_states", ["job_ref", "to_snapshot"], unique=False)


def _create_node_metrics() -> None:
    """The ``node_metrics`` table and its indexes."""
    op.create_table(
        "node_metrics",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("from_snapshot", sa.Integer(), nullable=False),
        sa.Column("to_snapshot", sa.Integer(), nullable=True),
        sa.Column("from_t", sa.Double(), nullable=False),
        sa.Column("to_t", sa.Double(), nullable=True),
        sa.Column(
            "partitions", sa.String(length=512), nullable=False, comment="',a,b,' for LIKE filters"
        ),
        sa.Column("available", sa.Boolean(), nullable=False),
        sa.Column("free", sa.SmallInteger(), nullable=False),
        sa.Column("free_memory_gb", sa.Double(), nullable=False),
        sa.Column("unusable", sa.SmallInteger(), nullable=False),
        sa.Column("unusable_spatial", sa.SmallInteger(), nullable=False),
        sa.Column("unusable_topology", sa.SmallInteger(), nullable=False),
        sa.Column("unusable_configuration", sa.SmallInteger(), nullable=False),
        sa.Column("unusable_memory_gb", sa.Double(), nullable=False),
        sa.Column("largest_free_block", sa.SmallInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["node_id"], ["nodes.id"], name=op.f("fk_node_metrics_node_id_nodes")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_node_metrics")),
    )
    op.create_index("ix_node_metrics_from_t", "node_metrics", ["from_t"], unique=False)
    op.create_index(
        "ix_node_metrics_open", "node_metrics", ["node_id", "to_snapshot"], unique=False
    )


def _create_node_metrics_hourly() -> None:
    """The ``node_metrics_hourly`` table and its indexes."""
    op.create_table(
        "node_metrics_hourly",
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("hour_t", sa.Double(), nullable=False),
        sa.Column("partitions", sa.String(length=512), nullable=False),
        sa.Column("seconds", sa.Double(), nullable=False),
        sa.Column(
            "unusable_seconds",
            sa.Double(),
            nullable=False,
            comment="seconds with at least one free GPU that no pending shape could use",
        ),
        sa.Column("unusable_gpu_seconds", sa.Double(), nullable=False),
        sa.Column("unusable_memory_gb_seconds", sa.Double(), nullable=False),
        sa.Column("free_gpu_seconds", sa.Double(), nullable=False),
        sa.Column("max_unusable", sa.SmallInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["node_id"], ["nodes.id"], name=op.f("fk_node_metrics_hourly_node_id_nodes")
        ),
        sa.PrimaryKeyConstraint("node_id", "hour_t", name=op.f("pk_node_metrics_hourly")),
    )
    op.create_index(
        "ix_node_metrics_hourly_hour_t", "node_metrics_hourly", ["hour_t"], unique=False
    )


def _create_node_states() -> None:
    """The ``node_states`` table and its indexes."""
    op.create_table(
        "node_states",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("from_snapshot", sa.Integer(), nullable=False),
        sa.Column("to_snapshot", sa.Integer(), nullable=True),
        sa.Column(
            "state",
            sa.String(length=256),
            nullable=False,
            comment="flags joined by '+', for queries",
        ),
        sa.Column("gpus_used", sa.SmallInteger(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["node_id"], ["nodes.id"], name=op.f("fk_node_states_node_id_nodes")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_node_states")),
    )
    op.create_index(
        op.f("ix_node_states_from_snapshot"), "node_states", ["from_snapshot"], unique=False
    )
    op.create_index("ix_node_states_open", "node_states", ["node_id", "to_snapshot"], unique=False)


def _create_snapshots() -> None:
    """The ``snapshots`` table and its indexes."""
    op.create_table(
        "snapshots",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster", sa.String(length=128), nullable=False),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "tz_offset_s",
            sa.Integer(),
            nullable=True,
            comment="UTC offset of the original taken_at; NULL = it was naive",
        ),
        sa.Column("t", sa.Double(), nullable=False, comment="taken_at as epoch seconds"),
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("schema_version", sa.SmallInteger(), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.Column(
            "node_order",
            sa.JSON(),
            nullable=True,
            comment="node names in snapshot order; NULL = natural sort order (the usual case)",
        ),
        sa.Column(
            "job_order",
            sa.JSON(),
            nullable=True,
            comment="job ids in snapshot order; NULL = natural sort order (the usual case)",
        ),
        sa.Column("nodes", sa.Integer(), nullable=False),
        sa.Column("jobs", sa.Integer(), nullable=False),
        sa.Column("saved_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["config_hash"],
            ["snapshot_configs.hash"],
            name=op.f("fk_snapshots_config_hash_snapshot_configs"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_snapshots")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_snapshots_cluster_t", "snapshots", ["cluster", "t"], unique=False)


def _create_group_metrics() -> None:
    """The ``group_metrics`` table and its indexes."""
    op.create_table(
        "group_metrics",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("cluster", sa.String(length=128), nullable=False),
        sa.Column("t", sa.Double(), nullable=False),
        sa.Column("nodes", sa.Integer(), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("used", sa.Integer(), nullable=False),
        sa.Column("free", sa.Integer(), nullable=False),
        sa.Column("free_unavailable", sa.Integer(), nullable=False),
        sa.Column("free_memory_gb", sa.Double(), nullable=False),
        sa.Column("unusable", sa.Integer(), nullable=False),
        sa.Column("unusable_memory_gb", sa.Double(), nullable=False),
        sa.Column("fgd", sa.Double(), nullable=False),
        sa.Column("largest_free_block", sa.SmallInteger(), nullable=False),
        sa.Column("pending", sa.Integer(), nullable=False),
        sa.Column("falsely_starved", sa.Integer(), nullable=False),
        sa.Column("short", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["snapshot_id"],
            ["snapshots.id"],
            name=op.f("fk_group_metrics_snapshot_id_snapshots"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("snapshot_id", "scope", "name", name=op.f("pk_group_metrics")),
    )
    op.create_index(
        "ix_group_metrics_series", "group_metrics", ["cluster", "scope", "name", "t"], unique=False
    )


def _create_plans() -> None:
    """The ``plans`` table and its indexes."""
    op.create_table(
        "plans",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster", sa.String(length=128), nullable=False),
        sa.Column("snapshot_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("inputs", sa.JSON(), nullable=False, comment="policy, settings, solver limits"),
        sa.Column("solver_status", sa.String(length=32), nullable=True),
        sa.Column("objective", sa.Double(), nullable=True),
        sa.Column("bound", sa.Double(), nullable=True),
        sa.Column("solve_time_s", sa.Double(), nullable=True),
        sa.Column(
            "holder", sa.String(length=256), nullable=True, comment="lease holder that made it"
        ),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("note", sa.Text(), nullable=False),
        sa.CheckConstraint("mode IN ('dry-run', 'enforce')", name=op.f("ck_plans_mode")),
        sa.CheckConstraint(
            "status IN ('open', 'applying', 'done', 'failed', 'aborted')",
            name=op.f("ck_plans_status"),
        ),
        sa.ForeignKeyConstraint(
            ["snapshot_id"],
            ["snapshots.id"],
            name=op.f("fk_plans_snapshot_id_snapshots"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_plans")),
    )
    op.create_index(op.f("ix_plans_snapshot_id"), "plans", ["snapshot_id"], unique=False)
    op.create_index("ix_plans_status", "plans", ["status"], unique=False)


def _create_plan_steps() -> None:
    """The ``plan_steps`` table and its indexes."""
    op.create_table(
        "plan_steps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("plan_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("target", sa.String(length=256), nullable=False),
        sa.Column("args", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "state IN ('pending', 'running', 'done', 'failed', 'skipped')",
            name=op.f("ck_plan_steps_state"),
        ),
        sa.ForeignKeyConstraint(
            ["plan_id"], ["plans.id"], name=op.f("fk_plan_steps_plan_id_plans"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_plan_steps")),
        sa.UniqueConstraint("plan_id", "seq", name=op.f("uq_plan_steps_plan_id_seq")),
    )


def _create_slurm_commands() -> None:
    """The ``slurm_commands`` table and its indexes."""
    op.create_table(
        "slurm_commands",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("plan_id", sa.Integer(), nullable=True),
        sa.Column("step_id", sa.Integer(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("argv", sa.JSON(), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True, comment="NULL: did not run/timed out"),
        sa.Column("stdout", sa.Text(), nullable=False),
        sa.Column("stderr", sa.Text(), nullable=False),
        sa.Column("duration_s", sa.Double(), nullable=False),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["plan_id"],
            ["plans.id"],
            name=op.f("fk_slurm_commands_plan_id_plans"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["step_id"],
            ["plan_steps.id"],
            name=op.f("fk_slurm_commands_step_id_plan_steps"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_slurm_commands")),
    )
    op.create_index(op.f("ix_slurm_commands_plan_id"), "slurm_commands", ["plan_id"], unique=False)
    op.create_index(
        op.f("ix_slurm_commands_started_at"), "slurm_commands", ["started_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_slurm_commands_started_at"), table_name="slurm_commands")
    op.drop_index(op.f("ix_slurm_commands_plan_id"), table_name="slurm_commands")
    op.drop_table("slurm_commands")
    op.drop_table("plan_steps")
    op.drop_index("ix_plans_status", table_name="plans")
    op.drop_index(op.f("ix_plans_snapshot_id"), table_name="plans")
    op.drop_table("plans")
    op.drop_index("ix_group_metrics_series", table_name="group_metrics")
    op.drop_table("group_metrics")
    op.drop_index("ix_snapshots_cluster_t", table_name="snapshots")
    op.drop_table("snapshots")
    op.drop_index("ix_node_states_open", table_name="node_states")
    op.drop_index(op.f("ix_node_states_from_snapshot"), table_name="node_states")
    op.drop_table("node_states")
    op.drop_index("ix_node_metrics_hourly_hour_t", table_name="node_metrics_hourly")
    op.drop_table("node_metrics_hourly")
    op.drop_index("ix_node_metrics_open", table_name="node_metrics")
    op.drop_index("ix_node_metrics_from_t", table_name="node_metrics")
    op.drop_table("node_metrics")
    op.drop_index("ix_job_states_open", table_name="job_states")
    op.drop_index(op.f("ix_job_states_from_snapshot"), table_name="job_states")
    op.drop_table("job_states")
    op.drop_index("ix_gpu_allocations_open", table_name="gpu_allocations")
    op.drop_index(op.f("ix_gpu_allocations_job_ref"), table_name="gpu_allocations")
    op.drop_index(op.f("ix_gpu_allocations_from_snapshot"), table_name="gpu_allocations")
    op.drop_table("gpu_allocations")
    op.drop_table("snapshot_configs")
    op.drop_table("rollup_progress")
    op.drop_table("nodes")
    op.drop_table("leases")
    op.drop_table("jobs")
    op.drop_table("group_metrics_hourly")
