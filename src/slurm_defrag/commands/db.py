"""``slurm-defrag db``: schema migrations, status and retention of the database."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated

import typer

from slurm_defrag.commands.common import JsonOpt

if TYPE_CHECKING:  # sqlalchemy is imported by the commands only, to keep startup fast
    from sqlalchemy import Engine

app = typer.Typer(
    name="db",
    help="The database: migrate its schema, show its state, prune old history.",
    no_args_is_help=True,
)

DbOpt = Annotated[
    str | None,
    typer.Option(
        "--db",
        envvar="SLURM_DEFRAG_DB_URL",
        help="Database URL: sqlite:///PATH or postgresql+psycopg://USER@HOST:PORT/DB "
        "(default: /var/lib/slurm-defrag/defrag.db as root, else "
        "$XDG_STATE_HOME/slurm-defrag/defrag.db).",
        show_default=False,
    ),
]


@app.command()
def upgrade(
    db: DbOpt = None,
    to: Annotated[str, typer.Option("--to", help="Target revision.")] = "head",
) -> None:
    """Create the schema or migrate it to the newest revision this version knows."""
    from slurm_defrag.store import migrate
    from slurm_defrag.store.engine import check_reachable, make_engine, resolve_url

    engine = make_engine(resolve_url(db))
    check_reachable(engine)
    before, after = migrate.upgrade(engine, to)
    what = "already at" if before == after else f"upgraded from {before or 'empty'} to"
    typer.echo(f"{_shown(engine)}: {what} revision {after}")


@app.command()
def downgrade(
    revision: Annotated[str, typer.Argument(help="Target revision, -1, or base (drops all).")],
    db: DbOpt = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="Confirm: a downgrade drops tables and their data.")
    ] = False,
) -> None:
    """Migrate the schema down to REVISION (drops data: needs --yes)."""
    from slurm_defrag.errors import InputError
    from slurm_defrag.store import migrate
    from slurm_defrag.store.engine import check_reachable, make_engine, resolve_url

    engine = make_engine(resolve_url(db))
    if not yes:
        # Every revision so far creates tables, so every downgrade deletes what they hold
        # (``base``, or ``-1`` from the first revision: everything). Asked, never assumed.
        raise InputError(
            f"db downgrade {revision} deletes the data of the dropped tables of "
            f"{_shown(engine)} (base: every snapshot, plan and history row): "
            "add --yes to confirm"
        )
    check_reachable(engine)
    before, after = migrate.downgrade(engine, revision)
    typer.echo(f"{_shown(engine)}: downgraded from {before or 'empty'} to {after or 'empty'}")


@app.command()
def current(db: DbOpt = None) -> None:
    """Show the schema revision (and the newest this version knows) and the leader lease."""
    from slurm_defrag.store import migrate
    from slurm_defrag.store.database import Store
    from slurm_defrag.store.engine import check_reachable, make_engine, resolve_url
    from slurm_defrag.store.lease import Lease

    engine = make_engine(resolve_url(db))
    check_reachable(engine)
    rev, head = migrate.current(engine), migrate.head()
    if rev is None:
        state = "empty (run `slurm-defrag db upgrade`)"
    elif rev == head:
        state = "(head)"
    elif not migrate.is_known(rev):
        state = f"(NEWER than this slurm-defrag, which knows up to {head})"
    else:
        state = f"(behind: head is {head}, run `slurm-defrag db upgrade`)"
    typer.echo(f"{_shown(engine)}: revision {rev or '-'} {state}")
    if rev == head:
        typer.echo(f"lease: {Lease(Store(engine), holder_id='cli').describe()}")


@app.command()
def prune(
    db: DbOpt = None,
    keep_days: Annotated[
        float, typer.Option("--keep-days", min=0.01, help="Full snapshots kept this long.")
    ] = 7.0,
    rollup_days: Annotated[
        float, typer.Option("--rollup-days", min=0.01, help="Hourly rollups kept this long.")
    ] = 400.0,
    plan_days: Annotated[
        float, typer.Option("--plan-days", min=0.01, help="Closed plans kept this long.")
    ] = 90.0,
    json_out: JsonOpt = False,
) -> None:
    """Roll old snapshots into hourly figures and delete them (open plans' data is kept)."""
    from slurm_defrag.errors import InputError
    from slurm_defrag.store.database import Store
    from slurm_defrag.store.engine import translate_errors
    from slurm_defrag.store.retention import RetentionPolicy
    from slurm_defrag.store.retention import prune as run_prune

    try:
        policy = RetentionPolicy(keep_days, rollup_days, plan_days)
    except ValueError as e:
        raise InputError(f"--keep-days/--rollup-days/--plan-days: {e}") from None
    with Store.open(db) as store, translate_errors(store.url):
        result = run_prune(store, policy)
    if json_out:
        sys.stdout.write(json.dumps(asdict(result), indent=1) + "\n")
        return
    typer.echo(
        f"{store.url}: rolled up {result.hours_rolled_up} h, deleted "
        f"{result.snapshots_deleted} snapshots ({result.snapshots_kept_for_open_plans} kept "
        f"for open plans), {result.interval_rows_deleted} interval rows, "
        f"{result.rollup_rows_deleted} old rollup rows, {result.plans_deleted} closed plans"
    )


def _shown(engine: Engine) -> str:
    from slurm_defrag.store.engine import display_url

    return display_url(engine.url)
