"""The simulator's FGD (sim/frag.py) and the service's (metrics/node.py) are one measure.

Two implementations stay on purpose: the simulator's is vectorised over every node and
every placement hypothesis in numpy, in milli-GPUs, with CPU and fractional GPUs (the openb
trace); the service's works on one node's GPU bit mask and its NVLink topology, whole GPUs,
with the pending queue's mix. On what both can express -- whole-GPU task types on
PCIe-only nodes, CPU never binding -- they must give the same number, node by node, and
this property holds them to it so that neither drifts alone.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_defrag.domain.cluster import Node
from slurm_defrag.domain.topology import mask_of, pcie_only
from slurm_defrag.domain.units import MILLI
from slurm_defrag.metrics.demand import DemandItem, WorkloadMix
from slurm_defrag.metrics.node import node_figures
from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.frag import FragModel, TaskType
from slurm_defrag.sim.model import NodeSpec

MODELS = ("a100", "h100")

# A node: (GPU count, model, busy GPUs); a task type: (GPUs, model or None, weight).
nodes_st = st.lists(
    st.integers(1, 8).flatmap(
        lambda g: st.tuples(st.just(g), st.sampled_from(MODELS), st.sets(st.integers(0, g - 1)))
    ),
    min_size=1,
    max_size=6,
)
types_st = st.lists(
    st.tuples(st.integers(1, 8), st.sampled_from((None, *MODELS)), st.integers(1, 10)),
    min_size=1,
    max_size=5,
)


def _sim_frag(
    nodes: list[tuple[int, str, set[int]]], types: list[tuple[int, str | None, int]]
) -> list[float]:
    """F_n of each node in GPUs, by the simulator's vectorised measure."""
    state = ClusterState(
        [
            NodeSpec(f"n{i}", cpu_milli=64_000, memory_mib=1 << 20, gpus=g, model=m)
            for i, (g, m, _) in enumerate(nodes)
        ]
    )
    for i, (_, _, busy) in enumerate(nodes):
        for gpu in busy:
            state.gpu_left[i, gpu] = 0
    total = sum(w for _, _, w in types)
    model = FragModel(
        state,
        [
            TaskType(
                cpu_milli=0,
                num_gpu=k,
                gpu_milli=MILLI,
                gpu_models=None if m is None else frozenset({m}),
                weight=w / total,
            )
            for k, m, w in types
        ],
    )
    frag = model.node_frag(state.cpu_left, state.gpu_left, state.model_idx)
    return [float(f) / MILLI for f in frag]


def _metrics_frag(
    nodes: list[tuple[int, str, set[int]]], types: list[tuple[int, str | None, int]]
) -> list[float]:
    """FGD of each node in GPUs, by the service's per-node figures."""
    mix = WorkloadMix(
        items=tuple(DemandItem(gpus_per_node=k, gpu_model=m, weight=w) for k, m, w in types)
    )
    out = []
    for i, (g, m, busy) in enumerate(nodes):
        node = Node(
            name=f"n{i}",
            partitions=("batch",),
            state="MIXED",
            gpu_model=m,
            gpu_count=g,
            gpu_memory_gb=80.0,
            gpus_used=frozenset(busy),
        )
        free = mask_of(range(g)) & ~mask_of(busy)
        metrics, _ = node_figures(node, pcie_only(g, switches=1), free, mix)
        out.append(metrics.counts.fgd)
    return out


@settings(max_examples=300, deadline=None)
@given(nodes=nodes_st, types=types_st)
def test_sim_fgd_equals_metrics_fgd(
    nodes: list[tuple[int, str, set[int]]], types: list[tuple[int, str | None, int]]
) -> None:
    assert _sim_frag(nodes, types) == pytest.approx(_metrics_frag(nodes, types), abs=1e-9)


def test_the_property_sees_a_difference() -> None:
    """Guard against a vacuous property: a type that fits counts nothing, one that does
    not fit counts every free GPU, in both measures."""
    nodes = [(4, "a100", {0})]  # three free GPUs
    fits, too_big = [(2, None, 1)], [(4, None, 1)]
    assert _sim_frag(nodes, fits) == _metrics_frag(nodes, fits) == [0.0]
    assert _sim_frag(nodes, too_big) == _metrics_frag(nodes, too_big) == [3.0]
