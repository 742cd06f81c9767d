"""The terminal GPU map draws jobs sharing a node in different colours (issue #45)."""

from __future__ import annotations

import zlib

from builders import node, running, snapshot
from slurm_defrag.report.gpu_map import node_cells


def test_two_jobs_whose_hashes_collide_get_two_colours() -> None:
    by_slot: dict[int, str] = {}
    for i in range(100, 1000):  # two ids the old crc32 % 16 coloured alike
        slot = zlib.crc32(str(i).encode()) % 16
        if slot in by_slot:
            a, b = by_slot[slot], str(i)
            break
        by_slot[slot] = str(i)
    snap = snapshot([node("n1")], [running(a, {"n1": [0, 1]}), running(b, {"n1": [2, 3]})])
    cells = node_cells(snap, snap.nodes[0])
    style = {span.start: str(span.style) for span in cells.spans}
    assert style[0] == style[1]  # one job, one colour
    assert style[0] != style[2]
