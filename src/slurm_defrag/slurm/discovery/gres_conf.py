"""gres.conf ``Links=``: the NVLink matrix Slurm is told about, turned into topologies.

Slurm's file format, so it is read here, in the adapters; :mod:`slurm_defrag.domain.topology`
keeps the graph and what a free NVLink block is, and knows nothing of gres.conf.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from slurm_defrag.domain.topology import MAX_GPUS_PER_NODE, GpuTopology, nvlink_pairs
from slurm_defrag.slurm.parse.mapping import expand_config_hosts


class LinksParseError(ValueError):
    pass


def links_topology_name(gpu_count: int, links: Sequence[tuple[int, int]]) -> str:
    """A stable name that says what the NVLink graph is, unique per distinct graph.

    ``nvlink-8-all`` (every pair linked), ``nvlink-8-pairs`` (0-1, 2-3, ...), ``nvlink-8-none``
    (no NVLink), else ``nvlink-8-<hash>`` of the link list; never a built-in template's
    name (those carry their own PCIe grouping and description). The same graph read from
    gres.conf, a map or a collector gets the same name, so one topology entry serves all.
    (NVLink counts per pair are not part of the graph: 12 or 18 links is one block.)
    """
    n, pairs = gpu_count, tuple(sorted(links))
    if not pairs:
        return f"nvlink-{n}-none"
    if len(pairs) == n * (n - 1) // 2:
        return f"nvlink-{n}-all"
    if n % 2 == 0 and pairs == nvlink_pairs(n).nvlinks:
        return f"nvlink-{n}-pairs"
    digest = hashlib.sha256(repr(pairs).encode()).hexdigest()[:8]
    return f"nvlink-{n}-{digest}"


def from_links_matrix(rows: Sequence[str | Sequence[int]], name: str | None = None) -> GpuTopology:
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
        elif isinstance(row, Sequence) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in row
        ):
            values = [int(v) for v in row]
        else:
            raise LinksParseError(f"Links row {r}: not a list of integers")
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
            if row[j] < 0:
                raise LinksParseError(f"Links row {i}: entry {j} is negative (only -1 for self)")
            if row[j] > 0:
                links.append((i, j))
    return GpuTopology(
        name=name or links_topology_name(n, links),
        gpu_count=n,
        nvlinks=tuple(links),
        description="from a Links= matrix",
    )


def parse_gres_conf_links(text: str) -> dict[str, GpuTopology]:
    """Read a gres.conf and return one topology per node that declares ``Links=``.

    Lines are ``NodeName=... Name=gpu ... File=/dev/nvidiaN ... Links=...``; the GPU index is
    the order of appearance per node (Slurm's own rule). Node names may be hostlists.
    Nodes with the same NVLink graph share one topology object, named after the graph
    (:func:`links_topology_name`).
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
                by_matrix[key] = from_links_matrix(node_rows)
            except LinksParseError as exc:
                raise LinksParseError(f"NodeName={node}: {exc}") from None
        out[node] = by_matrix[key]
    return out
