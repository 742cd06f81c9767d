"""The one line every view prints when some GPU nodes' NVLink topology is unknown.

Its own module: it needs the host-list compression (domain.hostlists), which the topology
module below it cannot import without a cycle (hostlists -> gres -> topology).
"""

from __future__ import annotations

from collections.abc import Iterable

from slurm_defrag.domain.hostlists import compress_hosts


def unknown_topology_line(nodes: Iterable[str]) -> str | None:
    """One line naming GPU nodes whose NVLink topology is unknown and how to give it, or
    None when there are none (frag, web, doctor, snapshot all print this line)."""
    names = list(nodes)
    if not names:
        return None
    return (
        f"NVLink topology unknown for {len(names)} GPU node(s): {compress_hosts(names)}; "
        "they are treated as having no NVLink. Set gres_conf, topology_map or topology_dir "
        "(or let the cli backend find gres.conf beside slurm.conf)"
    )
