"""slurm_commands.executed: a dry-run preview is stored as not executed, without exit code.

Before this revision a dry-run command was stored with exit code 0, as if it had run; only
``dry_run`` told it apart. Upgrading marks those rows ``executed = false`` and clears
their exit code; downgrading restores exit code 0 on the dry-run rows that had none for
that reason (the previous revision's meaning) and drops the column.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 17:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_commands = sa.table(
    "slurm_commands",
    sa.column("dry_run", sa.Boolean()),
    sa.column("executed", sa.Boolean()),
    sa.column("exit_code", sa.Integer()),
    sa.column("stderr", sa.Text()),
)


def upgrade() -> None:
    with op.batch_alter_table("slurm_commands") as batch:
        batch.add_column(
            sa.Column(
                "executed",
                sa.Boolean(),
                server_default=sa.true(),
                nullable=False,
                comment="false: a dry-run preview, never sent to Slurm",
            )
        )
    op.execute(
        _commands.update()
        .where(_commands.c.dry_run == sa.true())
        .values(executed=False, exit_code=None)
    )


def downgrade() -> None:
    op.execute(
        _commands.update()
        .where(_commands.c.executed == sa.false(), _commands.c.exit_code.is_(None))
        .values(exit_code=sa.case((_commands.c.stderr == "", 0), else_=1))
    )
    with op.batch_alter_table("slurm_commands") as batch:
        batch.drop_column("executed")
