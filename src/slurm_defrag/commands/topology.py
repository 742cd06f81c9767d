"""``slurm-defrag topology``: collect a GPU node's NVLink matrix; show what was collected.

``collect`` runs on each GPU node (pdsh/clush, cron, a Slurm prolog; docs/topology.md) and
writes ``DIR/<node>.json`` (``slurm-defrag-topology/1``); the service reads that directory
(``topology_dir``) on ``AutoDetect=nvml`` sites where gres.conf has no ``Links=``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from slurm_defrag.report.console import output_console

app = typer.Typer(
    help="Collect the NVLink topology on a GPU node (AutoDetect=nvml sites).",
    no_args_is_help=True,
)


@app.command()
def collect(
    output: Annotated[
        Path,
        typer.Option(
            "--output", "-o", help="Directory to write <node>.json into (created).", readable=False
        ),
    ],
    node: Annotated[
        str | None,
        typer.Option(
            "--node",
            help="Slurm NodeName of this node (default: $SLURMD_NODENAME, set in Slurm "
            "prologs and jobs, else the short hostname).",
        ),
    ] = None,
    nvidia_smi: Annotated[
        str, typer.Option("--nvidia-smi", help="nvidia-smi to run (name on PATH or path).")
    ] = "nvidia-smi",
    from_file: Annotated[
        Path | None,
        typer.Option(
            "--from-file",
            help="Read a saved 'nvidia-smi topo -m' output instead of running nvidia-smi.",
            readable=False,
        ),
    ] = None,
    status_file: Annotated[
        Path | None,
        typer.Option(
            "--status-file",
            help="With --from-file: a saved 'nvidia-smi nvlink --status' to drop down links.",
            readable=False,
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, help="Seconds per nvidia-smi call.")
    ] = 30.0,
) -> None:
    """Read this node's GPU-to-GPU NVLink matrix and write OUTPUT/<node>.json atomically."""
    from slurm_defrag.errors import InputError
    from slurm_defrag.slurm.discovery import nvidia_smi as smi

    name = smi.check_node_name(node if node is not None else smi.default_node_name())
    if status_file is not None and from_file is None:
        raise InputError("--status-file needs --from-file (a live run reads nvlink --status)")
    if from_file is not None:
        topo = smi.parse_topo_matrix(_read(from_file), str(from_file))
        if status_file is not None:
            status = smi.parse_link_status(_read(status_file), str(status_file))
            topo = smi.apply_link_status(topo, status, str(status_file))
    else:
        topo = smi.collect(nvidia_smi, timeout)
    err = Console(stderr=True, highlight=False)
    for warning in topo.warnings:
        err.print(f"slurm-defrag: warning: {warning}", markup=False, soft_wrap=True)
    target = smi.write_record(output, smi.record(name, topo, datetime.now(UTC)))
    pairs = sum(1 for i in range(topo.gpus) for j in range(i + 1, topo.gpus) if topo.links[i][j])
    err.print(f"{target}: {topo.gpus} GPUs, {pairs} NVLink pairs", markup=False, soft_wrap=True)


def _read(path: Path) -> str:
    from slurm_defrag.errors import InputError
    from slurm_defrag.slurm.discovery.nvidia_smi import MAX_OUTPUT_CHARS

    try:
        with path.open(encoding="utf-8", errors="strict") as f:
            text = f.read(MAX_OUTPUT_CHARS + 1)
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    return text


@app.command()
def show(
    path: Annotated[
        Path, typer.Argument(help="A collected <node>.json, or the directory.", readable=False)
    ],
) -> None:
    """Print what was collected: per node, GPUs, NVLink pairs, when, and the matrix."""
    from slurm_defrag.errors import InputError
    from slurm_defrag.report.safe_text import clean

    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not files:
        raise InputError(f"{path}: no *.json files")
    out = output_console(highlight=False)
    for file in files:
        try:
            data = json.loads(_read(file))
        except json.JSONDecodeError as exc:
            raise InputError(f"{file}: not JSON: {exc.msg} at line {exc.lineno}") from None
        except (ValueError, RecursionError):  # a 5,000-digit number, nesting too deep
            raise InputError(f"{file}: not JSON (number too long or nested too deep)") from None
        if not isinstance(data, dict) or data.get("format") != "slurm-defrag-topology/1":
            raise InputError(f"{file}: format is not slurm-defrag-topology/1")
        links = data.get("links")
        gpus = data.get("gpus")
        if (
            not isinstance(gpus, int)
            or not isinstance(links, list)
            or len(links) != gpus
            or not all(
                isinstance(r, list) and len(r) == gpus and all(type(v) is int for v in r)
                for r in links
            )
        ):
            raise InputError(f"{file}: links is not a {gpus}x{gpus} integer matrix")
        pairs = sum(1 for i in range(gpus) for j in range(i + 1, gpus) if links[i][j] > 0)
        out.print(
            f"{clean(str(data.get('node')))}: {gpus} GPUs, {pairs} NVLink pairs, "
            f"collected {clean(str(data.get('collected_at')))} by {clean(str(data.get('tool')))}",
            markup=False,
            soft_wrap=True,
        )
        for i, row in enumerate(links):
            cells = " ".join(" X" if v < 0 else f"{v:2d}" if v else " ." for v in row)
            out.print(f"  GPU{i:<2} {cells}", markup=False, soft_wrap=True)
