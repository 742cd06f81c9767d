"""Options and helpers shared by several commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.errors import InputError

SnapshotOpt = Annotated[
    Path | None,
    typer.Option("--snapshot", "-s", help="Snapshot JSON file (default: read the live cluster)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]


def load_or_read_snapshot(path: Path | None) -> ClusterSnapshot:
    """The snapshot file if given, else a live read through the configured Slurm backend."""
    from slurm_defrag.snapshot_file import load_snapshot

    if path is not None:
        return load_snapshot(path)
    raise InputError("--snapshot: reading the live cluster is not available in this build")
