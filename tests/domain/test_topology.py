"""GPU topology templates and the NVLink block definition, checked against hand counts.

Definition under test (``domain/topology.py``): a k-GPU NVLink block is a k-clique of the
NVLink graph, or a whole connected NVLink domain of size k. Counts below are worked out by
hand from each template's link list, e.g. NVSwitch-8 is the complete graph K8 so it has
C(8, k) blocks of each size k.
"""

from __future__ import annotations

from collections import Counter
from itertools import combinations
from pathlib import Path

import pytest
from pydantic import ValidationError

from slurm_defrag.domain.topology import (
    BUILTIN_TOPOLOGIES,
    GpuTopology,
    indices_of,
    mask_of,
    nvlink_pairs,
    popcount,
)
from slurm_defrag.slurm.discovery.gres_conf import (
    LinksParseError,
    from_links_matrix,
    parse_gres_conf_links,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def m(*gpus: int) -> int:
    return mask_of(gpus)


def test_mask_helpers() -> None:
    assert mask_of([0, 2, 3]) == 0b1101
    assert indices_of(0b1101) == (0, 2, 3)
    assert popcount(0b1101) == 3
    assert mask_of([]) == 0
    assert indices_of(0) == ()


def test_builtin_names() -> None:
    """The templates a snapshot may name without defining them (docs/snapshot-format.md)."""
    assert sorted(BUILTIN_TOPOLOGIES) == sorted(
        [
            "nvswitch-8",
            "nvswitch-4",
            "nvlink-pairs-8",
            "nvlink-pairs-4",
            "nvlink-pairs-2",
            "dgx1-hybrid-cube-mesh",
            "pcie-2x4",
            "pcie-1x4",
            "pcie-1x2",
            "pcie-1x1",
        ]
    )


# name -> (gpu_count, {block size: number of blocks}, max_block, domains as masks)
TEMPLATES = {
    # K8: C(8,k) cliques of every size; one domain.
    "nvswitch-8": (8, {1: 8, 2: 28, 3: 56, 4: 70, 5: 56, 6: 28, 7: 8, 8: 1}, 8, (0xFF,)),
    "nvswitch-4": (4, {1: 4, 2: 6, 3: 4, 4: 1}, 4, (0xF,)),
    # links (0,1) (2,3) (4,5) (6,7): 8 single GPUs and 4 pairs; each pair is a domain.
    "nvlink-pairs-8": (8, {1: 8, 2: 4}, 2, (m(0, 1), m(2, 3), m(4, 5), m(6, 7))),
    "nvlink-pairs-4": (4, {1: 4, 2: 2}, 2, (m(0, 1), m(2, 3))),
    "nvlink-pairs-2": (2, {1: 2, 2: 1}, 2, (m(0, 1),)),
    # Two all-to-all quads {0..3} {4..7} plus i--i+4: 6+6+4 = 16 links. Triangles only
    # inside a quad (4 each; a cross link i--i+4 has no common neighbour), 4-cliques are the
    # two quads ({i,j,i+4,j+4} lacks i--j+4), no 5..7-cliques; the island of 8 is one domain,
    # hence one 8-block and no 5-, 6- or 7-blocks.
    "dgx1-hybrid-cube-mesh": (8, {1: 8, 2: 16, 3: 8, 4: 2, 8: 1}, 8, (0xFF,)),
    # no NVLink: every GPU is its own domain and only single GPUs are blocks
    "pcie-2x4": (8, {1: 8}, 1, tuple(1 << i for i in range(8))),
    "pcie-1x4": (4, {1: 4}, 1, (1, 2, 4, 8)),
    "pcie-1x2": (2, {1: 2}, 1, (1, 2)),
    "pcie-1x1": (1, {1: 1}, 1, (1,)),
}


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_template_blocks(name: str) -> None:
    topo = BUILTIN_TOPOLOGIES[name]
    gpu_count, sizes, max_block, domains = TEMPLATES[name]
    assert topo.name == name
    assert topo.gpu_count == gpu_count
    assert Counter(popcount(b) for b in topo.blocks) == sizes
    assert len(topo.blocks) == len(set(topo.blocks)), "each block listed once"
    for k in range(1, gpu_count + 1):
        assert len(topo.blocks_of_size(k)) == sizes.get(k, 0)
    assert topo.max_block == max_block
    assert topo.block_sizes == frozenset(sizes)
    assert topo.domains == domains
    assert topo.all_mask == (1 << gpu_count) - 1


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_blocks_are_sorted_largest_first(name: str) -> None:
    """largest_free_block relies on this order: the first free block is the largest."""
    sizes = [popcount(b) for b in BUILTIN_TOPOLOGIES[name].blocks]
    assert sizes == sorted(sizes, reverse=True)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_blocks_match_the_definition_by_brute_force(name: str) -> None:
    """Every GPU subset is a block iff it is a clique or a whole domain (checked exhaustively)."""
    topo = BUILTIN_TOPOLOGIES[name]
    links = {frozenset(link) for link in topo.nvlinks}
    expected = set()
    for k in range(1, topo.gpu_count + 1):
        for subset in combinations(range(topo.gpu_count), k):
            clique = all(frozenset(p) in links for p in combinations(subset, 2))
            if clique or mask_of(subset) in topo.domains:
                expected.add(mask_of(subset))
    assert set(topo.blocks) == expected


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_every_gpu_lies_in_a_block_of_each_possible_size(name: str) -> None:
    """On the built-in templates an idle node wastes no GPU for any block size it can form.

    This is what makes "an all-free node has zero fragmentation" true for them (see the
    property tests); a custom topology need not have it.
    """
    topo = BUILTIN_TOPOLOGIES[name]
    for k in topo.block_sizes:
        assert topo.gpus_in_free_blocks(topo.all_mask, frozenset({k})) == topo.all_mask


@pytest.mark.parametrize(
    ("name", "gpus", "expected"),
    [
        ("nvswitch-8", (0, 5, 7), True),
        ("nvswitch-8", tuple(range(8)), True),
        ("nvswitch-8", (), False),  # the empty set is not a block
        ("nvlink-pairs-8", (0, 1), True),
        ("nvlink-pairs-8", (1, 2), False),  # neighbours by index, different cards
        ("nvlink-pairs-8", (0, 1, 2, 3), False),
        ("nvlink-pairs-8", (5,), True),  # k = 1 is always a block
        ("dgx1-hybrid-cube-mesh", (0, 1, 2, 3), True),  # a quad
        ("dgx1-hybrid-cube-mesh", (0, 4), True),  # a cross link
        ("dgx1-hybrid-cube-mesh", (0, 5), False),  # no direct link
        ("dgx1-hybrid-cube-mesh", (0, 1, 4, 5), False),  # 0--5 and 1--4 missing
        ("dgx1-hybrid-cube-mesh", (0, 1, 4), False),  # 1--4 missing
        ("dgx1-hybrid-cube-mesh", tuple(range(8)), True),  # the whole domain
        ("dgx1-hybrid-cube-mesh", tuple(range(7)), False),  # not a clique, not the domain
        ("pcie-2x4", (0,), True),
        ("pcie-2x4", (0, 1), False),  # a PCIe switch makes no block
    ],
)
def test_is_block(name: str, gpus: tuple[int, ...], expected: bool) -> None:
    assert BUILTIN_TOPOLOGIES[name].is_block(gpus) is expected


# (template, free GPUs, largest free block, {k: disjoint free k-blocks})
FREE_MASK_CASES = [
    ("nvswitch-8", (), 0, {1: 0, 2: 0}),
    ("nvswitch-8", tuple(range(8)), 8, {1: 8, 2: 4, 3: 2, 4: 2, 5: 1, 8: 1}),
    ("nvswitch-8", (4, 5, 6, 7), 4, {2: 2, 3: 1, 4: 1, 8: 0}),
    ("nvswitch-8", (0, 3, 6), 3, {2: 1, 3: 1, 4: 0}),
    ("nvswitch-4", (0, 1, 3), 3, {2: 1, 3: 1, 4: 0}),
    # course node04: GPUs 0, 3, 4, 5 busy -> free 1, 2, 6, 7; only the card 6+7 is whole
    ("nvlink-pairs-8", (1, 2, 6, 7), 2, {1: 4, 2: 1, 4: 0}),
    ("nvlink-pairs-8", tuple(range(8)), 2, {2: 4, 3: 0, 4: 0}),
    ("nvlink-pairs-8", (0, 2, 4, 6), 1, {1: 4, 2: 0}),  # one GPU of every card
    ("dgx1-hybrid-cube-mesh", tuple(range(8)), 8, {2: 4, 3: 2, 4: 2, 6: 0, 8: 1}),
    ("dgx1-hybrid-cube-mesh", (0, 1, 2, 3), 4, {2: 2, 4: 1}),
    # busy 2, 3, 5. Free links: 0-1, 0-4, 4-6, 4-7, 6-7. Largest clique {4,6,7}. Two
    # disjoint pairs at most (5 GPUs), e.g. {0,1} {6,7}; one triangle; no quad.
    ("dgx1-hybrid-cube-mesh", (0, 1, 4, 6, 7), 3, {1: 5, 2: 2, 3: 1, 4: 0}),
    # everything but GPU 0: quad B is free, the island is not whole
    ("dgx1-hybrid-cube-mesh", (1, 2, 3, 4, 5, 6, 7), 4, {3: 2, 4: 1, 8: 0}),
    ("dgx1-hybrid-cube-mesh", (0, 4), 2, {2: 1}),
    ("dgx1-hybrid-cube-mesh", (0, 5), 1, {2: 0}),
    ("pcie-2x4", tuple(range(8)), 1, {1: 8, 2: 0}),
    ("pcie-1x1", (0,), 1, {1: 1, 2: 0}),
]


@pytest.mark.parametrize(("name", "free", "largest", "disjoint"), FREE_MASK_CASES)
def test_free_blocks(
    name: str, free: tuple[int, ...], largest: int, disjoint: dict[int, int]
) -> None:
    topo = BUILTIN_TOPOLOGIES[name]
    mask = mask_of(free)
    assert topo.largest_free_block(mask) == largest
    for k, count in disjoint.items():
        assert topo.disjoint_blocks(mask, k) == count, f"k={k}"
    # every free block is made of free GPUs only
    for k in topo.block_sizes:
        assert all(b & ~mask == 0 for b in topo.free_blocks(mask, k))


def test_disjoint_blocks_is_a_maximum_not_a_greedy_count() -> None:
    """A greedy pick can block a better packing; the count must be the true maximum.

    Path 0-1-2-3 (links 0-1, 1-2, 2-3): greedy taking {1,2} first leaves one pair; the
    maximum is two ({0,1} and {2,3}).
    """
    path = GpuTopology(name="path-4", gpu_count=4, nvlinks=((0, 1), (1, 2), (2, 3)))
    assert path.disjoint_blocks(path.all_mask, 2) == 2
    assert path.disjoint_blocks(m(0, 1, 2), 2) == 1
    # the whole path is one domain of 4 -> one 4-block, although it is no clique
    assert path.is_block(range(4))
    assert path.disjoint_blocks(path.all_mask, 4) == 1
    assert path.block_sizes == frozenset({1, 2, 4})


def test_gpus_in_free_blocks() -> None:
    topo = BUILTIN_TOPOLOGIES["nvlink-pairs-8"]
    free = m(1, 2, 6, 7)
    assert topo.gpus_in_free_blocks(free, frozenset({2})) == m(6, 7)
    assert topo.gpus_in_free_blocks(free, frozenset({1})) == free
    assert topo.gpus_in_free_blocks(free, frozenset({3})) == 0  # no 3-block on this topology
    assert topo.gpus_in_free_blocks(free, frozenset()) == 0


def test_can_form_block_follows_block_sizes_not_max_block() -> None:
    """DGX-1: max_block is 8 (the island), yet no 5-, 6- or 7-GPU block exists.

    Regression: the fit check used ``k <= max_block`` and called a 6-GPU NVLink job
    "falsely starved" on an idle DGX-1.
    """
    dgx1 = BUILTIN_TOPOLOGIES["dgx1-hybrid-cube-mesh"]
    assert dgx1.max_block == 8
    assert [k for k in range(1, 9) if dgx1.can_form_block(k)] == [1, 2, 3, 4, 8]
    assert not dgx1.can_form_block(0)
    assert not dgx1.can_form_block(9)


@pytest.mark.parametrize(
    ("links", "message"),
    [
        (((0, 4),), "out of range"),
        (((1, 1),), "itself"),
        (((0, 1), (1, 0)), "duplicate"),
    ],
)
def test_topology_validation(links: tuple[tuple[int, int], ...], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        GpuTopology(name="bad", gpu_count=4, nvlinks=links)


def test_topology_gpu_count_bounds() -> None:
    with pytest.raises(ValidationError):
        GpuTopology(name="none", gpu_count=0)
    with pytest.raises(ValidationError):
        GpuTopology(name="too-many", gpu_count=17)  # clique enumeration is 2**n


# -- gres.conf Links= -------------------------------------------------------------------


def test_recorded_gres_conf_gives_every_node_an_all_to_all_topology() -> None:
    """The 22.05 recording's gres.conf: 8 nodes x 8 GPUs, every Links entry 12 or -1.

    Its lines are interleaved (nvidia0 of every node, then nvidia1, ...); per node the
    rows still come in GPU order, so each node gets the same 8-GPU all-to-all matrix.
    """
    topologies = parse_gres_conf_links((FIXTURES / "gres.conf-22.05").read_text())
    assert sorted(topologies) == [f"node0{i}" for i in range(1, 9)]
    for name, topo in topologies.items():
        assert topo.gpu_count == 8, name
        assert topo.nvlinks == tuple(combinations(range(8), 2)), name  # all 28 pairs
        assert len(topo.blocks) == 2**8 - 1  # every non-empty subset is a block
        assert topo.max_block == 8
    # identical matrices share one object, named after the graph (all pairs linked)
    assert len({id(t) for t in topologies.values()}) == 1
    assert topologies["node05"].name == "nvlink-8-all"


def test_links_pairs_matrix() -> None:
    """A hand-written 4-GPU matrix: two bridged pairs, 2 NVLinks each, 0 = no link."""
    rows = [
        "-1,2,0,0",
        "2,-1,0,0",
        "0,0,-1,2",
        "0,0,2,-1",
    ]
    topo = from_links_matrix(rows, name="pairs")
    assert topo.nvlinks == ((0, 1), (2, 3))
    assert topo.blocks == nvlink_pairs(4).blocks
    assert topo.domains == (m(0, 1), m(2, 3))
    # the same matrix as integer lists (the reader also accepts parsed rows)
    assert from_links_matrix([[-1, 1], [1, -1]], name="x").nvlinks == ((0, 1),)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (["-1,1,0", "0,-1,0", "0,0,-1"], "not symmetric between GPU 0 and GPU 1"),
        (["-1,1", "1,-1,0"], "row 1 has 3 entries, expected 2"),
        # a short row after the first: once an IndexError, now a message naming the row
        (["-1,1,1", "1,-1,1", "1"], "row 2 has 1 entries, expected 3"),
        (["0,1", "1,-1"], "entry 0 must be -1"),
        (["-1,x", "x,-1"], "not a comma list of integers"),
        ([], "0 rows"),
    ],
)
def test_links_matrix_errors(rows: list[str], message: str) -> None:
    with pytest.raises(LinksParseError, match=message):
        from_links_matrix(rows, name="bad")


def test_gres_conf_hostlists_comments_and_other_lines() -> None:
    text = """
# comment line
NodeName=gpu[1-2] Name=gpu Type=h100 File=/dev/nvidia0 Links=-1,4   # trailing comment
NodeName=gpu[1-2] Name=gpu Type=h100 File=/dev/nvidia1 Links=4,-1
NodeName=gpu3 Name=gpu Type=h100 File=/dev/nvidia0
NodeName=gpu[1-2] Name=shard Count=8
"""
    topologies = parse_gres_conf_links(text)
    assert sorted(topologies) == ["gpu1", "gpu2"]  # gpu3 declares no Links=
    assert topologies["gpu2"].nvlinks == ((0, 1),)


def test_gres_conf_error_names_the_node() -> None:
    text = "NodeName=n7 Name=gpu File=/dev/nvidia0 Links=-1,1\nNodeName=n7 Name=gpu Links=0,-1\n"
    with pytest.raises(LinksParseError, match="NodeName=n7: Links not symmetric"):
        parse_gres_conf_links(text)
