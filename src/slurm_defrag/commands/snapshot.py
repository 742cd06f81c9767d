"""``slurm-defrag snapshot``: read the live cluster once, show or save the snapshot."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.console import Console
from rich.table import Table

from slurm_defrag.commands.common import JsonOpt, command_words
from slurm_defrag.report.console import output_console

if TYPE_CHECKING:  # pydantic models: imported when used, to keep startup fast
    from slurm_defrag.domain.cluster import ClusterSnapshot, Node


def snapshot(
    backend: Annotated[
        Literal["cli", "rest", "pyslurm"] | None,
        typer.Option("--backend", "-b", help="cli | rest | pyslurm (default: settings, cli)."),
    ] = None,
    json_out: JsonOpt = False,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Also write the snapshot JSON here.", readable=False),
    ] = None,
    gres_conf: Annotated[
        Path | None,
        typer.Option(
            "--gres-conf", help="gres.conf with Links= (NVLink topology).", readable=False
        ),
    ] = None,
    topology_map: Annotated[
        Path | None,
        typer.Option(
            "--topology-map", help="YAML/JSON hostlist -> template or Links rows.", readable=False
        ),
    ] = None,
    topology_dir: Annotated[
        Path | None,
        typer.Option(
            "--topology-dir",
            help="Directory of <node>.json topology collector files.",
            readable=False,
        ),
    ] = None,
    command_prefix: Annotated[
        str | None,
        typer.Option(
            "--command-prefix",
            help="cli backend: words put before each Slurm command, e.g. "
            "'docker exec slurmdefrag-bookworm-slurmctld'.",
        ),
    ] = None,
    rest_url: Annotated[str | None, typer.Option("--rest-url", help="slurmrestd URL.")] = None,
    rest_socket: Annotated[
        Path | None, typer.Option("--rest-socket", help="slurmrestd unix socket.", readable=False)
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option("--token-file", help="File with the slurmrestd JWT.", readable=False),
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", min=0.1, help="Seconds per Slurm call.")
    ] = None,
) -> None:
    """Read the live cluster: nodes, jobs with per-node GPU indices, reservations."""
    from slurm_defrag.slurm.backends import open_backend
    from slurm_defrag.slurm.connection import load_settings
    from slurm_defrag.snapshot_file import dump_snapshot, save_snapshot

    settings = load_settings(
        backend=backend,
        gres_conf=gres_conf,
        topology_map=topology_map,
        topology_dir=topology_dir,
        command_prefix=command_words(command_prefix) if command_prefix is not None else None,
        rest_url=rest_url,
        rest_socket=rest_socket,
        rest_token_file=token_file,
        command_timeout_s=timeout,
        rest_timeout_s=timeout,
    )
    snap = open_backend(settings).snapshot()
    if out is not None:
        save_snapshot(snap, out)
    if json_out:
        sys.stdout.write(dump_snapshot(snap) + "\n")
        return
    output_console().print(summary_table(snap))
    from slurm_defrag.slurm.discovery.topology_sources import unknown_topology_warning

    warning = unknown_topology_warning(snap)
    if warning is not None:
        typer.echo(f"slurm-defrag: warning: {warning}", err=True)
    if out is not None:
        Console(stderr=True).print(f"snapshot written to {out}", markup=False)


def summary_table(snap: ClusterSnapshot) -> Table:
    """One row per node: state, GPUs busy/total and which, jobs on it, reservation."""
    from slurm_defrag.domain.cluster import JobState
    from slurm_defrag.domain.gres import format_index_ranges
    from slurm_defrag.report.safe_text import cells, markup

    jobs_on: dict[str, list[str]] = {}
    for job in snap.running_gpu_jobs():
        for node in job.gpus:
            jobs_on.setdefault(node, []).append(job.id)
    pending = sum(1 for j in snap.jobs if j.state == JobState.PENDING)
    busy = sum(len(n.gpus_used) for n in snap.nodes)
    total = sum(n.gpu_count for n in snap.nodes)
    t = Table(
        title=f"{markup(snap.cluster)} via {markup(snap.source)} at "
        f"{snap.taken_at:%Y-%m-%d %H:%M:%S %Z}: "
        f"{len(snap.nodes)} nodes, GPUs {busy}/{total} busy, "
        f"{sum(1 for _ in snap.running_gpu_jobs())} GPU jobs running, {pending} pending, "
        f"{len(snap.reservations)} reservations",
        title_justify="left",
    )
    columns = ("node", "state", "model", "topology (source)", "busy", "busy GPUs", "jobs",
               "reservation / reason")  # fmt: skip
    for col in columns:
        t.add_column(col, overflow="fold")
    for n in snap.nodes:
        t.add_row(
            *cells(
                n.name,
                "+".join(sorted(n.state)),
                n.gpu_model or "-",
                _topology_cell(snap, n),
                f"{len(n.gpus_used)}/{n.gpu_count}",
                format_index_ranges(n.gpus_used) if n.gpus_used else "-",
                ",".join(jobs_on.get(n.name, [])) or "-",
                " ".join(x for x in (n.reservation or "", n.reason) if x) or "-",
            )
        )
    return t


def _topology_cell(snap: ClusterSnapshot, node: Node) -> str:
    if not node.gpu_count:
        return "-"
    name = snap.topology_of(node).name
    return f"{name} ({node.topology_source})" if node.topology_source else name
