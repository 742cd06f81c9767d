"""Hypothesis strategies for random small snapshots, shared by metrics and store tests.

Random snapshots are small (1-6 nodes of random built-in templates, random running jobs on
random free GPUs, GPUs busy with no visible job, random node states and pending requests),
so each example costs a few milliseconds.
"""

from __future__ import annotations

from hypothesis import strategies as st

from slurm_defrag.domain.cluster import (
    UNKNOWN_OWNER,
    ClusterSnapshot,
    GpuRequest,
    Job,
    JobState,
    Node,
    Partition,
)
from slurm_defrag.domain.topology import BUILTIN_TOPOLOGIES
from slurm_defrag.synth import EPOCH

TEMPLATES = sorted(BUILTIN_TOPOLOGIES)
MODELS = ("a100", "h100")
PARTITIONS = ("batch", "high")
STATES = ("IDLE", "MIXED", "MIXED", "MIXED", "IDLE+DRAIN", "DOWN", "IDLE+RESERVED")
REASONS = ("Resources", "Resources", "Priority", "JobHeldAdmin")
RUNNING_IDS = tuple(f"r{i}" for i in range(6))


@st.composite
def requests(draw: st.DrawFn) -> GpuRequest:
    nodes = draw(st.integers(1, 2))
    model = draw(st.sampled_from((None, None, *MODELS)))
    if draw(st.integers(0, 4)) == 0:  # a spreadable --gpus=N request
        return GpuRequest(
            nodes=nodes,
            total_gpus=draw(st.integers(1, 10)),
            gpu_model=model,
            nvlink=draw(st.booleans()),
        )
    return GpuRequest(
        nodes=nodes,
        gpus_per_node=draw(st.integers(1, 8)),
        gpu_model=model,
        nvlink=draw(st.booleans()),
        whole_node=draw(st.integers(0, 5)) == 0,
    )


@st.composite
def snapshots(draw: st.DrawFn) -> ClusterSnapshot:
    n_nodes = draw(st.integers(1, 6))
    nodes: list[Node] = []
    held: dict[str, dict[str, set[int]]] = {}  # job id -> node -> GPUs
    for i in range(n_nodes):
        name = f"node{i:02d}"
        topo = BUILTIN_TOPOLOGIES[draw(st.sampled_from(TEMPLATES))]
        # Each GPU: free, held by one of a few running jobs (ids shared across nodes, so some
        # jobs span nodes), or busy with no visible owner.
        owners = draw(
            st.lists(
                st.sampled_from((None, None, UNKNOWN_OWNER, *RUNNING_IDS)),
                min_size=topo.gpu_count,
                max_size=topo.gpu_count,
            )
        )
        for g, owner in enumerate(owners):
            if owner not in (None, UNKNOWN_OWNER):
                held.setdefault(owner, {}).setdefault(name, set()).add(g)
        unknown = {g for g, o in enumerate(owners) if o == UNKNOWN_OWNER}
        # gpus_used is the node's own view: sometimes all busy GPUs, sometimes only unknown
        if draw(st.booleans()):
            unknown |= {g for g, o in enumerate(owners) if o is not None}
        model = draw(st.sampled_from(MODELS))
        nodes.append(
            Node(
                name=name,
                partitions=draw(st.sampled_from((("batch",), ("batch", "high"), ("high",)))),
                state=draw(st.sampled_from(STATES)),
                gpu_model=model,
                gpu_count=topo.gpu_count,
                gpu_memory_gb=draw(st.sampled_from((40.0, 80.0))),
                topology=topo.name,
                gpus_used=frozenset(unknown),
            )
        )
    jobs = [
        Job(
            id=jid,
            state=JobState.RUNNING,
            partition="batch",
            gpus={n: frozenset(g) for n, g in per_node.items()},
        )
        for jid, per_node in sorted(held.items())
    ]
    for k, req in enumerate(draw(st.lists(requests(), max_size=4))):
        jobs.append(
            Job(
                id=f"p{k}",
                state=JobState.PENDING,
                request=req,
                partition=draw(st.sampled_from(("", *PARTITIONS))),
                reason=draw(st.sampled_from(REASONS)),
            )
        )
    parts = tuple(
        Partition(name=p, nodes=tuple(n.name for n in nodes if p in n.partitions))
        for p in PARTITIONS
    )
    return ClusterSnapshot(
        cluster="prop", taken_at=EPOCH, nodes=tuple(nodes), jobs=tuple(jobs), partitions=parts
    )
