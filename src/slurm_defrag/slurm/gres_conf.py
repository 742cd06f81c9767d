"""gres.conf ``Links=``: the NVLink matrix Slurm is told about, turned into topologies.

Slurm's file format, so it is read here, in the adapters; :mod:`slurm_defrag.domain.topology`
keeps the graph and what a free NVLink block is, and knows nothing of gres.conf.
"""

from __future__ import annotations

from collections.abc import Sequence

from slurm_defrag.domain.topology import MAX_GPUS_PER_NODE, GpuTopology
from slurm_defrag.slurm.mapping import expand_config_hosts


class LinksParseError(ValueError):
    pass


def from_links_matrix(rows: Sequence[str | Sequence[int]], name: str) -> GpuTopology:
    """Build a topology from gres.conf ``Links=`` rows, one row per GPU in index order.

    Slurm's convention: ``-1`` marks the GPU itself, ``0`` no direct link, a positive
    number the count of NVLinks between the two GPUs. Row i of a well-formed matrix is
    symmetric with column i; an asymmetric matrix is rejected rather than guessed.
    """
    matrix: list[list[int]] = []
    for r, row in enumerate(rows):
        if isinstance(row, str):
            try:
                values = [int(v) for v in row.split(",")]
            except ValueError as exc:
                raise LinksParseError(
                    f"Links row {r}: not a comma list of integers: {row!r}"
                ) from exc
        else:
            values = list(row)
        matrix.append(values)
    n = len(matrix)
    if not 1 <= n <= MAX_GPUS_PER_NODE:
        raise LinksParseError(f"Links: {n} rows, expected 1..{MAX_GPUS_PER_NODE} (one per GPU)")
    # Check every row's length before comparing rows with columns: a short row further down
    # would otherwise surface as an IndexError instead of a message naming the row.
    for i, row in enumerate(matrix):
        if len(row) != n:
            raise LinksParseError(f"Links row {i} has {len(row)} entries, expected {n}")
    links: list[tuple[int, int]] = []
    for i, row in enumerate(matrix):
        if row[i] != -1:
            raise LinksParseError(f"Links row {i}: entry {i} must be -1 (the GPU itself)")
        for j in range(i + 1, n):
            if row[j] != matrix[j][i]:
                raise LinksParseError(f"Links not symmetric between GPU {i} and GPU {j}")
            if row[j] > 0:
                links.append((i, j))
    return GpuTopology(
        name=name, gpu_count=n, nvlinks=tuple(links), description="from gres.conf Links="
    )


def parse_gres_conf_links(text: str) -> dict[str, GpuTopology]:
    """Read a gres.conf and return one topology per node that declares ``Links=``.

    Lines are ``NodeName=... Name=gpu ... File=/dev/nvidiaN ... Links=...``; the GPU index is
    the order of appearance per node (Slurm's own rule). Node names may be hostlists.
    Nodes with identical matrices share one topology object (named after the first node).
    """
    rows: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        if fields.get("Name") != "gpu" or "Links" not in fields or "NodeName" not in fields:
            continue
        for node in expand_config_hosts(fields["NodeName"], "gres.conf NodeName"):
            rows.setdefault(node, []).append(fields["Links"])
    by_matrix: dict[tuple[str, ...], GpuTopology] = {}
    out: dict[str, GpuTopology] = {}
    for node, node_rows in rows.items():
        key = tuple(node_rows)
        if key not in by_matrix:
            try:
                by_matrix[key] = from_links_matrix(node_rows, name=f"links-{node}")
            except LinksParseError as exc:
                raise LinksParseError(f"NodeName={node}: {exc}") from None
        out[node] = by_matrix[key]
    return out
