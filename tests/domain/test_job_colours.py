"""Jobs sharing a node get different colour slots (issue #45: two jobs on one node drew
in the same colour, the map read as one job)."""

from __future__ import annotations

import zlib

from builders import node, running, snapshot
from slurm_defrag.domain.job_colours import colour_slots, preferred


def same_preference(size: int, count: int = 2) -> list[str]:
    """``count`` job ids whose hashes pick the same slot of ``size``."""
    by_slot: dict[int, list[str]] = {}
    for i in range(100, 10_000):
        ids = by_slot.setdefault(zlib.crc32(str(i).encode()) % size, [])
        ids.append(str(i))
        if len(ids) == count:
            return ids
    raise AssertionError("no such ids")


def test_jobs_sharing_a_node_differ_and_others_keep_their_hash() -> None:
    a, b = same_preference(16)
    lone = "7"
    snap = snapshot(
        [node("n1"), node("n2")],
        [running(a, {"n1": [0, 1]}), running(b, {"n1": [2]}), running(lone, {"n2": [0]})],
    )
    slots = colour_slots(snap, 16)
    assert slots[a] != slots[b]
    assert slots[a] == preferred(a, 16)  # the lower id keeps its colour
    assert slots[lone] == preferred(lone, 16)
    assert colour_slots(snap, 16) == slots  # the same snapshot, the same colours


def test_a_job_across_nodes_differs_from_every_neighbour() -> None:
    a, b, c = same_preference(4, 3)
    snap = snapshot(
        [node("n1"), node("n2")],
        [running(a, {"n1": [0], "n2": [0]}), running(b, {"n1": [1]}), running(c, {"n2": [1]})],
    )
    slots = colour_slots(snap, 4)
    assert slots[a] not in (slots[b], slots[c])
    # b and c never meet: they may share a colour (here: both took the next one)
    assert slots[b] == slots[c]


def test_more_jobs_on_a_node_than_slots_still_differ() -> None:
    ids = [str(i) for i in range(100, 105)]
    snap = snapshot([node("n1")], [running(j, {"n1": [k]}) for k, j in enumerate(ids)])
    slots = colour_slots(snap, 2)
    assert len(set(slots.values())) == len(ids)
    assert sorted(slots.values())[:2] == [0, 1]
