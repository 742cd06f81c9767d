"""The GPU map: one row per node, one cell per GPU slot, coloured by the job holding it.

Free GPUs that form the node's largest free NVLink block are drawn ``□`` (green); other free
GPUs ``·`` (yellow: free but stranded for NVLink work); GPUs on nodes taking no new work
``x`` (dim). Busy GPUs show ``█`` in a colour per job, so a job spread over GPUs and nodes
reads at a glance.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from slurm_defrag.domain.cluster import UNKNOWN_OWNER, ClusterSnapshot, Node
from slurm_defrag.domain.job_colours import colour_slots
from slurm_defrag.domain.topology import indices_of
from slurm_defrag.metrics.report import FragReport
from slurm_defrag.report.safe_text import clean, text

_PALETTE = (
    "bright_blue",
    "magenta",
    "cyan",
    "bright_red",
    "blue",
    "bright_magenta",
    "red",
    "dark_orange",
    "purple",
    "deep_sky_blue1",
    "orchid",
    "salmon1",
    "steel_blue",
    "medium_purple",
    "hot_pink",
    "turquoise2",
)


def job_colours(snapshot: ClusterSnapshot) -> dict[str, str]:
    """A colour per job holding GPUs; jobs sharing a node differ (beyond 16 jobs around
    one, the palette repeats)."""
    n = len(_PALETTE)
    return {job: _PALETTE[slot % n] for job, slot in colour_slots(snapshot, n).items()}


def node_cells(
    snapshot: ClusterSnapshot, node: Node, colours: dict[str, str] | None = None
) -> Text:
    colours = job_colours(snapshot) if colours is None else colours
    owners = snapshot.gpu_owners[node.name]
    topo = snapshot.topology_of(node)
    free = snapshot.free_masks[node.name]
    block = next((b for b in topo.blocks if b & free == b), 0) if node.available else 0
    block_gpus = set(indices_of(block)) if block.bit_count() > 1 else set()
    text = Text()
    for i, owner in enumerate(owners):
        if i and topo.pcie_switches and any(i == grp[0] for grp in topo.pcie_switches):
            text.append("|", style="dim")
        if owner is None:
            if not node.available:
                text.append("x", style="dim")
            elif i in block_gpus:
                text.append("□", style="bold green")
            else:
                text.append("·", style="bold yellow")
        elif owner == UNKNOWN_OWNER:
            text.append("▒", style="grey50")
        else:
            text.append("█", style=colours[owner])
    return text


def gpu_map(
    snapshot: ClusterSnapshot, nodes: list[Node] | None = None, title: str = "GPU map"
) -> Table:
    """Render ``nodes`` (default: all) as a table of GPU slots."""
    nodes = list(snapshot.nodes) if nodes is None else nodes
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("node")
    table.add_column("model")
    table.add_column("topology", style="dim")
    table.add_column("GPUs")
    table.add_column("jobs", overflow="fold")
    colours = job_colours(snapshot)
    for node in nodes:
        if node.gpu_count == 0:
            continue
        owners = snapshot.gpu_owners[node.name]
        jobs = Text()
        for jid in dict.fromkeys(o for o in owners if o not in (None, UNKNOWN_OWNER)):
            assert jid is not None
            jobs.append(f"{clean(jid)} ", style=colours[jid])
        name = text(node.name)
        if not node.available:
            name.append(" (" + clean(",".join(sorted(node.state))) + ")", style="dim")
        table.add_row(
            name,
            text(node.gpu_model or ""),
            text(snapshot.topology_of(node).name),
            node_cells(snapshot, node, colours),
            jobs,
        )
    return table


LEGEND = Text.assemble(
    ("█", "bright_blue"),
    " busy (colour = job)  ",
    ("□", "bold green"),
    " free, in largest free NVLink block  ",
    ("·", "bold yellow"),
    " free, stranded  ",
    ("x", "dim"),
    " node takes no new work  ",
    ("▒", "grey50"),
    " busy, job not visible",
)


def fragmented_map(
    snapshot: ClusterSnapshot, report: FragReport, max_nodes: int | None = None
) -> Group:
    """The GPU map with its legend; over ``max_nodes`` nodes, only the most fragmented.

    Most fragmented = most unusable free GPUs, then highest FGD; the rows keep the
    snapshot's node order so neighbours stay neighbours.
    """
    ranked = sorted(report.nodes, key=lambda m: (-m.counts.unusable.total, -m.counts.fgd, m.node))
    shown = {m.node for m in ranked[:max_nodes]}
    chosen = [n for n in snapshot.nodes if n.name in shown]
    title = (
        "GPU map"
        if len(chosen) == len(report.nodes)
        else (f"GPU map: the {len(chosen)} most fragmented of {len(report.nodes)} nodes")
    )
    return Group(gpu_map(snapshot, chosen, title), LEGEND)
