"""``slurm-defrag frag``: fragmentation figures and falsely starved jobs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from slurm_defrag.commands.common import JsonOpt, SnapshotOpt, load_or_read_snapshot
from slurm_defrag.errors import InputError
from slurm_defrag.report.console import output_console

if TYPE_CHECKING:
    from slurm_defrag.metrics.demand import WorkloadMix


def frag(
    snapshot: SnapshotOpt = None,
    json_out: JsonOpt = False,
    mix: Annotated[
        Path | None,
        typer.Option(
            "--mix",
            help="Workload mix JSON to measure against (default: pending queue).",
            readable=False,
        ),
    ] = None,
    max_nodes: Annotated[
        int, typer.Option("--max-nodes", min=1, help="Nodes shown in the map and per job.")
    ] = 64,
) -> None:
    """Fragmentation per node, partition, GPU model and cluster; falsely starved jobs.

    Examples:

      slurm-defrag frag                                  # the live cluster
      slurm-defrag frag --snapshot examples/course.json  # a saved snapshot
      slurm-defrag frag --mix examples/mix-a100x3.json   # against a declared mix
      slurm-defrag snapshot --json | slurm-defrag frag -s - --json
    """
    from slurm_defrag.metrics.compute import compute
    from slurm_defrag.report.frag_view import render

    snap = load_or_read_snapshot(snapshot)
    report = compute(snap, _load_mix(mix) if mix else None)
    if json_out:
        sys.stdout.write(report.model_dump_json(indent=1) + "\n")
        from slurm_defrag.domain.unknown_topology import unknown_topology_line

        warning = unknown_topology_line(report.topology_unknown)
        if warning is not None:  # the JSON lists them too (topology_unknown)
            typer.echo(f"slurm-defrag: warning: {warning}", err=True)
        return
    render(output_console(), snap, report, max_nodes)


def _load_mix(path: Path) -> WorkloadMix:
    """Read a declared mix: JSON ``{"items": [{"gpus_per_node": 4, "nvlink": true, ...}]}``
    (here, not in metrics/: the metrics never read files)."""
    from pydantic import ValidationError

    from slurm_defrag.metrics.demand import WorkloadMix
    from slurm_defrag.snapshot_file import format_validation_error, read_json

    data = read_json(path)
    try:
        return WorkloadMix.model_validate({"source": "declared", **data})
    except ValidationError as exc:
        raise InputError(format_validation_error(path, exc)) from None
