"""False-starvation statuses of pending GPU jobs, one hand-made cluster per status.

Statuses (docs/metrics.md, ``metrics/starvation.py``): can-start, falsely-starved with a
reason (spatial | topology | configuration), short, unsatisfiable, held.
"""

from __future__ import annotations

import pytest

from builders import busy, node, pending, snapshot
from slurm_defrag.domain.cluster import ClusterSnapshot, Job, Node
from slurm_defrag.metrics.compute import compute
from slurm_defrag.metrics.demand import MixSource
from slurm_defrag.metrics.fit import Verdict
from slurm_defrag.metrics.report import PendingStatus


def status_of(nodes: list[Node], jobs: list[Job]) -> PendingStatus:
    """The diagnosis of the one pending job among ``jobs``."""
    report = compute(snapshot(nodes, jobs))
    (status,) = report.pending
    return status


def test_can_start() -> None:
    """NVSwitch node with 4 free GPUs; a 3-GPU NVLink job fits there now."""
    s = status_of(
        [node("n1"), node("n2")],
        [busy("n1", range(4)), busy("n2", range(8)), pending("j", 3, nvlink=True)],
    )
    assert (s.status, s.reason) == ("can-start", None)
    assert s.message == "fits now on n1"
    assert s.diagnosis == ()  # only falsely starved jobs get a per-node diagnosis


def test_falsely_starved_spatial() -> None:
    """Two NVSwitch nodes with 2 free GPUs each: 4 free >= 3, but no node has 3."""
    s = status_of(
        [node("n1"), node("n2")],
        [busy("n1", range(6)), busy("n2", range(6)), pending("j", 3, nvlink=True)],
    )
    assert (s.status, s.reason) == ("falsely-starved", "spatial")
    assert (s.free_matching, s.free_in_partition) == (4, 4)
    assert [(d.node, d.verdict, d.free) for d in s.diagnosis] == [
        ("n1", Verdict.SPATIAL, 2),
        ("n2", Verdict.SPATIAL, 2),
    ]
    assert s.diagnosis[0].detail == "2 free GPUs, job needs 3 on one node"


def test_falsely_starved_topology() -> None:
    """DGX-1 with GPUs 2, 3, 5 busy: 5 free >= 4 on the node, but no free quad.

    Free links: 0-1, 0-4, 4-6, 4-7, 6-7; the largest free block is the triangle {4,6,7}.
    """
    s = status_of(
        [node("d", "dgx1-hybrid-cube-mesh", model="v100")],
        [busy("d", (2, 3, 5)), pending("j", 4, nvlink=True)],
    )
    assert (s.status, s.reason) == ("falsely-starved", "topology")
    assert s.free_matching == 5
    (d,) = s.diagnosis
    assert (d.verdict, d.free, d.largest_free_block) == (Verdict.TOPOLOGY, 5, 3)
    assert "largest free NVLink block is 3" in d.detail


def test_falsely_starved_configuration() -> None:
    """A 2-GPU H100 job: 1 H100 free, 4 A100 free. The partition has 5 free >= 2, but only
    1 on nodes of the model it insists on."""
    nodes = [node("h", model="h100"), node("a")]
    s = status_of(nodes, [busy("h", range(7)), busy("a", range(4)), pending("j", 2, model="h100")])
    assert (s.status, s.reason) == ("falsely-starved", "configuration")
    assert (s.free_matching, s.free_in_partition) == (1, 5)
    verdicts = {d.node: d.verdict for d in s.diagnosis}
    assert verdicts == {"h": Verdict.SPATIAL, "a": Verdict.CONFIGURATION}
    assert "job needs h100" in next(d.detail for d in s.diagnosis if d.node == "a")


def test_falsely_starved_topology_by_wiring() -> None:
    """A 3-GPU NVLink job: 2 free on an NVSwitch node (capable), 4 free on NVLink pairs
    (can never give 3 connected). Capable free 2 < 3, partition free 6 >= 3. The free GPUs
    that would make up the difference are of the right model but wired in pairs, so the
    reason is the topology (the same word the node figures use for them)."""
    nodes = [node("sw"), node("pairs", "nvlink-pairs-8")]
    s = status_of(
        nodes, [busy("sw", range(6)), busy("pairs", (0, 3, 4, 5)), pending("j", 3, nvlink=True)]
    )
    assert (s.status, s.reason) == ("falsely-starved", "topology")
    assert (s.free_matching, s.free_in_partition) == (2, 6)


def test_short() -> None:
    """4 GPUs wanted, 2 free in the whole partition: a real shortage, not fragmentation."""
    s = status_of([node("n")], [busy("n", range(6)), pending("j", 4)])
    assert (s.status, s.reason) == ("short", None)
    assert s.message == "needs 4 GPUs, only 2 free in its partition"
    assert s.diagnosis == ()


NEVER = "no node of its partition can ever host it"


@pytest.mark.parametrize(
    ("nodes", "job", "free_matching", "message"),
    [
        # NVLink pairs can never connect 3 GPUs, even idle
        ([node("p", "nvlink-pairs-8", state="IDLE")], pending("j", 3, nvlink=True), 0, NEVER),
        # no node of the model it asks for
        ([node("a", state="IDLE")], pending("j", 2, model="h100"), 0, NEVER),
        # 8 GPUs per node on 4-GPU nodes
        ([node("a", "nvswitch-4", state="IDLE")], pending("j", 8), 0, NEVER),
        # Regression: a DGX-1 offers NVLink blocks of 1-4 and 8 GPUs, never 6. This was
        # "falsely-starved (topology)" on an idle node, because max_block (8) >= 6.
        (
            [node("d", "dgx1-hybrid-cube-mesh", model="v100", state="IDLE")],
            pending("j", 6, nvlink=True),
            0,
            NEVER,
        ),
        # 2 nodes x 4 GPUs, but the partition has one node: that node is capable (its 8 free
        # GPUs count as matching), there are just too few such nodes. The message says so
        # instead of claiming no node could ever host it.
        (
            [node("a", state="IDLE")],
            pending("j", 4, nodes=2),
            8,
            "needs 2 node(s) / 8 GPUs; its partition has only 1 node(s)",
        ),
    ],
    ids=["topology", "model", "gpu-count", "dgx1-6gpu-nvlink", "too-few-nodes"],
)
def test_unsatisfiable(nodes: list[Node], job: Job, free_matching: int, message: str) -> None:
    s = status_of(nodes, [job])
    assert (s.status, s.reason) == ("unsatisfiable", None)
    assert s.free_matching == free_matching
    assert s.message.startswith(message)


@pytest.mark.parametrize(
    "reason",
    [
        "JobHeldAdmin",
        "JobHeldUser",
        "Dependency",
        "BeginTime",
        "ReqNodeNotAvail, UnavailableNodes:node07",
    ],
)
def test_held(reason: str) -> None:
    """Jobs waiting on a hold or a dependency would wait on an empty cluster too.

    They are reported as held, and they are not part of the workload mix.
    """
    snap = snapshot([node("n", state="IDLE")], [pending("j", 3, reason=reason)])
    report = compute(snap)
    (s,) = report.pending
    assert (s.status, s.reason) == ("held", None)
    assert reason in s.message
    assert report.mix.source is MixSource.DEFAULT  # nothing pending waits on resources


def test_spreadable_gpus_request() -> None:
    """``--gpus=5`` without a per-node count may spread over nodes: 3 + 3 free suffices."""
    nodes = [node("n1"), node("n2")]
    s = status_of(nodes, [busy("n1", range(5)), busy("n2", range(5)), pending("j", total_gpus=5)])
    assert (s.status, s.gpus_per_node) == ("can-start", None)
    assert s.message == "6 usable GPUs free"


def test_spreadable_request_is_only_configuration_starved() -> None:
    """``--gpus=4`` of H100: 1 H100 free plus 4 A100 free. It could spread, so scattering
    is never the cause; the model is."""
    nodes = [node("h", model="h100"), node("a")]
    s = status_of(
        nodes, [busy("h", range(7)), busy("a", range(4)), pending("j", total_gpus=4, model="h100")]
    )
    assert (s.status, s.reason) == ("falsely-starved", "configuration")


def test_multi_node_spatial() -> None:
    """2 nodes x 4 NVLink GPUs. Free: n1 4, n2 3, n3 3 -> one node fits, 10 >= 8 free on
    3 capable nodes, only one of them has 4 free -> spatial."""
    nodes = [node("n1"), node("n2"), node("n3")]
    jobs = [
        busy("n1", range(4)),
        busy("n2", range(5)),
        busy("n3", range(5)),
        pending("j", 4, nodes=2, nvlink=True),
    ]
    s = status_of(nodes, jobs)
    assert (s.status, s.reason, s.gpus) == ("falsely-starved", "spatial", 8)
    assert s.free_matching == 10
    assert {d.node: d.verdict for d in s.diagnosis} == {
        "n1": Verdict.FITS,
        "n2": Verdict.SPATIAL,
        "n3": Verdict.SPATIAL,
    }


def test_multi_node_topology() -> None:
    """2 nodes x 4 NVLink GPUs on two DGX-1s with GPUs 2, 3, 5 busy: each has 5 free but no
    free quad -> both have the GPU count, the topology keeps the job out."""
    nodes = [node(f"d{i}", "dgx1-hybrid-cube-mesh", model="v100") for i in (1, 2)]
    jobs = [busy("d1", (2, 3, 5)), busy("d2", (2, 3, 5)), pending("j", 4, nodes=2, nvlink=True)]
    s = status_of(nodes, jobs)
    assert (s.status, s.reason) == ("falsely-starved", "topology")


def test_multi_node_can_start_names_the_nodes() -> None:
    nodes = [node("n1"), node("n2"), node("n3")]
    jobs = [busy("n2", range(8)), pending("j", 4, nodes=2)]
    s = status_of(nodes, jobs)
    assert (s.status, s.message) == ("can-start", "fits now on n1, n3")


def test_diagnosis_lists_nodes_of_the_partition_with_free_gpus() -> None:
    """Per-node verdicts: a node with no free GPU needs no explanation, and a node outside
    the job's partition is not listed."""
    nodes = [node("full"), node("two"), node("other", partitions=("high",)), node("one")]
    jobs = [
        busy("full", range(8)),
        busy("two", range(6)),
        busy("one", range(7)),
        pending("j", 3, nvlink=True),
    ]
    s = status_of(nodes, jobs)
    assert s.status == "falsely-starved"
    assert [d.node for d in s.diagnosis] == ["one", "two"]


def test_unavailable_nodes_are_explained_with_their_own_state() -> None:
    """Identical nodes share one class, but each unavailable node names its own state.

    Regression: every node of the class was explained with the first node's state words
    (a drained node was reported as "DOWN").
    """
    nodes = [
        node("a", state="DOWN"),
        node("b", state="IDLE+DRAIN"),
        node("c", state="IDLE", reservation="maint"),
        node("d"),
        node("e"),
    ]
    jobs = [busy("d", range(6)), busy("e", range(6)), pending("j", 3, nvlink=True)]
    s = status_of(nodes, jobs)
    assert (s.status, s.reason) == ("falsely-starved", "spatial")
    # unavailable nodes count neither as capable nor in the partition's free GPUs
    assert (s.free_matching, s.free_in_partition) == (4, 4)
    details = {d.node: (d.verdict, d.detail, d.largest_free_block) for d in s.diagnosis}
    assert details["a"] == (Verdict.UNAVAILABLE, "not available: DOWN", 0)
    assert details["b"] == (Verdict.UNAVAILABLE, "not available: DRAIN,IDLE", 0)
    assert details["c"] == (Verdict.UNAVAILABLE, "not available: IDLE reservation=maint", 0)


def test_pending_jobs_form_the_mix() -> None:
    """The mix is the pending queue: one item per distinct shape, weight = number of jobs."""
    snap: ClusterSnapshot = snapshot(
        [node("n")],
        [
            pending("a", 2, nvlink=True),
            pending("b", 2, nvlink=True),
            pending("c", 4),
            pending("h", 8, reason="JobHeldUser"),
        ],
    )
    m = compute(snap).mix
    assert m.source is MixSource.PENDING
    assert sorted((i.gpus_per_node, i.nvlink, i.weight) for i in m.items) == [
        (2, True, 2.0),
        (4, False, 1.0),
    ]


def test_drained_capable_node_makes_job_short_not_unsatisfiable() -> None:
    """An 8-GPU job; the only node that could host it is drained. The hardware exists, so
    the request is fine: the job is short of available capacity, not unsatisfiable."""
    drained = node("big").model_copy(update={"state": frozenset({"IDLE", "DRAIN"})})
    s = status_of([drained, node("small", "nvswitch-4")], [pending("j", 8, nvlink=True)])
    assert s.status == "short"
    assert "drained, down or reserved" in s.message


def test_spread_request_beyond_partition_hardware_is_unsatisfiable() -> None:
    """--gpus=12 on a partition with 8 GPUs in all can never run, even on an idle cluster."""
    from slurm_defrag.domain.cluster import GpuRequest, Job, JobState

    job = Job(
        id="j",
        partition="batch",
        state=JobState.PENDING,
        reason="Resources",
        request=GpuRequest(total_gpus=12),
    )
    s = status_of([node("a")], [job])
    assert s.status == "unsatisfiable"


def test_unsatisfiable_job_says_why_each_node_cannot_take_it() -> None:
    """An 8-GPU h100 NVLink job: every node fails for its own reason, named per node."""
    drained = node("d1", model="h100").model_copy(update={"state": frozenset({"IDLE", "DRAIN"})})
    nodes = [
        node("a1", state="IDLE"),  # a100: wrong model
        node("h4", "nvswitch-4", model="h100", state="IDLE"),  # 4 GPUs: too few
        node("x1", model="h100", state="IDLE", partitions=("other",)),  # not in partition
        drained,
    ]
    # The drained h100 could host it once resumed (short); without it, unsatisfiable.
    s = status_of(nodes[:3], [pending("j", 8, nvlink=True, model="h100")])
    assert s.status == "unsatisfiable"
    got = {d.node: (d.verdict, d.detail) for d in s.diagnosis}
    assert got == {
        "a1": (Verdict.CONFIGURATION, "8 free a100 GPUs, job needs h100"),
        "h4": (Verdict.CONFIGURATION, "node has 4 GPUs, job needs 8 per node"),
        "x1": (Verdict.NOT_IN_PARTITION, "not in partition batch"),
    }
    assert [d.node for d in s.diagnosis] == ["a1", "h4", "x1"]  # its partition's nodes first
    assert s.diagnosis_more == 0


def test_unsatisfiable_diagnosis_is_capped_with_a_count_of_the_rest() -> None:
    from slurm_defrag.metrics.starvation import UNSATISFIABLE_EXAMPLES

    nodes = [node(f"a{i:02}", state="IDLE") for i in range(20)]
    nodes.append(node("p4", "nvswitch-4", model="h100", state="IDLE"))
    s = status_of(nodes, [pending("j", 8, model="h100")])
    assert s.status == "unsatisfiable"
    assert len(s.diagnosis) == UNSATISFIABLE_EXAMPLES
    assert s.diagnosis_more == 21 - UNSATISFIABLE_EXAMPLES
    # Each different reason is shown before a second node with the same one.
    assert "p4" in {d.node for d in s.diagnosis}


def test_frag_table_lists_the_examples_and_counts_the_rest() -> None:
    from rich.console import Console

    from slurm_defrag.report.frag_view import render

    nodes = [node(f"a{i:02}", state="IDLE") for i in range(8)]
    snap = snapshot(nodes, [pending("j", 8, model="h100")])
    console = Console(record=True, width=200, color_system=None)
    render(console, snap, compute(snap), max_nodes=3)
    out = console.export_text()
    assert "a00: configuration: 8 free a100 GPUs, job needs h100" in out
    assert "... 5 more nodes" in out
