"""``slurm-defrag frag`` as tables: summary per scope, pending jobs, the GPU map."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.domain.unknown_topology import unknown_topology_line
from slurm_defrag.metrics.report import BLOCK_SIZES, FragReport, GroupMetrics, request_text
from slurm_defrag.report.gpu_map import fragmented_map
from slurm_defrag.report.safe_text import cells, lines, markup, text


def _scope_table(title: str, groups: list[GroupMetrics]) -> Table:
    t = Table(title=title, title_justify="left")
    t.add_column("scope")
    for col in (
        "free/GPUs",
        "free GB",
        "max blk",
        "fits " + "·".join(map(str, BLOCK_SIZES)),
        "unusable s/t/c",
        "unus. GB",
        "FGD",
    ):
        t.add_column(col, justify="right")
    for g in groups:
        c = g.counts
        t.add_row(
            text(f"{g.name} ({g.nodes})"),
            f"{c.free}/{c.gpus}",
            f"{c.free_memory_gb:.0f}",
            str(g.largest_free_block),
            " ".join(f"{c.fits.get(k, 0)}/{c.nvlink_fits.get(k, 0)}" for k in BLOCK_SIZES),
            f"{c.unusable.spatial}/{c.unusable.topology}/{c.unusable.configuration}",
            f"{c.unusable_memory_gb:.0f}",
            f"{c.fgd:.1f}",
        )
    return t


def _pending_table(report: FragReport, max_nodes: int) -> Table:
    t = Table(title="Pending GPU jobs", title_justify="left")
    for col in ("job", "request", "status", "why", "per node"):
        t.add_column(col, overflow="fold")
    for p in report.pending:
        req = request_text(p)
        status = p.status + (f" ({p.reason})" if p.reason else "")
        style = "bold red" if p.status == "falsely-starved" else ""
        rows = [f"{d.node}: {d.verdict.value}: {d.detail}" for d in p.diagnosis[:max_nodes]]
        more = max(0, len(p.diagnosis) - max_nodes) + p.diagnosis_more
        if more:
            rows.append(f"... {more} more nodes" + ("" if p.diagnosis_more else " (see --json)"))
        t.add_row(*cells(p.job_id, req), text(status, style), text(p.message), lines(rows))
    return t


def render(console: Console, snapshot: ClusterSnapshot, report: FragReport, max_nodes: int) -> None:
    mix = ", ".join(
        f"{i.nodes}x{i.gpus_per_node}{' nvlink' if i.nvlink else ''}"
        f"{' ' + i.gpu_model if i.gpu_model else ''} (w={i.weight:g})"
        for i in report.mix.items
    )
    console.print(
        f"[bold]{markup(report.cluster)}[/bold] at "
        f"{report.taken_at:%Y-%m-%d %H:%M:%S %Z}   "
        f"workload mix ({markup(report.mix.source.value)}): {markup(mix)}"
    )
    warning = unknown_topology_line(report.topology_unknown)
    if warning is not None:
        # soft_wrap: one line, whatever the terminal width (scripts grep for it)
        console.print(text("warning: " + warning, "bold yellow"), soft_wrap=True)
    console.print(
        _scope_table("Fragmentation", [report.cluster_metrics, *report.partitions, *report.models])
    )
    console.print(
        "[dim]scope (nodes). fits k: k-GPU jobs that could start now, any GPUs / "
        "NVLink block. unusable: free GPUs no job of the mix can use now, by cause "
        "spatial/topology/configuration. FGD: expected unusable free GPUs.[/dim]"
    )
    if report.pending:
        console.print(_pending_table(report, max_nodes))
    console.print(fragmented_map(snapshot, report, max_nodes))
