"""Result types of the metrics pass. Their JSON is the stable ``frag --json`` output.

Field names and meanings are documented in ``docs/metrics.md``; add fields, never rename.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict

from slurm_defrag.metrics.demand import WorkloadMix
from slurm_defrag.metrics.fit import Verdict

BLOCK_SIZES = (1, 2, 4, 8)
"""Job sizes (GPUs on one node) that spatial and NVLink fit counts are reported for."""


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Unusable(_Out):
    """Free GPUs on available nodes that no job of the mix could be given now, by cause."""

    spatial: int = 0
    topology: int = 0
    configuration: int = 0

    @property
    def total(self) -> int:
        return self.spatial + self.topology + self.configuration


class FragCounts(_Out):
    """Additive figures, identical in shape for a node, a partition and the cluster."""

    gpus: int = 0
    used: int = 0
    free: int = 0
    free_unavailable: int = 0
    """Free GPUs on nodes that take no new work (drained, down, reserved)."""
    free_memory_gb: float = 0.0
    fits: dict[int, int] = {}
    """k -> how many k-GPU single-node jobs could start now (count only, no topology)."""
    nvlink_fits: dict[int, int] = {}
    """k -> how many k-GPU jobs needing an NVLink block could start now."""
    whole_nodes_free: int = 0
    unusable: Unusable = Unusable()
    unusable_memory_gb: float = 0.0
    outside_nvlink_blocks: int = 0
    """Free GPUs in no free NVLink block of any size the mix asks NVLink for."""
    fgd: float = 0.0
    """FGD (Weng et al. ATC'23): expected free GPUs unusable by a job drawn from the mix."""


class NodeMetrics(_Out):
    node: str
    partitions: tuple[str, ...]
    gpu_model: str | None
    topology: str
    available: bool
    largest_free_block: int
    counts: FragCounts


class GroupMetrics(_Out):
    name: str
    nodes: int
    largest_free_block: int
    counts: FragCounts

    @property
    def fgd_ratio(self) -> float:
        return self.counts.fgd / self.counts.free if self.counts.free else 0.0


class NodeDiagnosis(_Out):
    node: str
    verdict: Verdict
    free: int
    largest_free_block: int
    detail: str


class PendingStatus(_Out):
    job_id: str
    partition: str
    gpus: int
    nodes: int
    gpus_per_node: int | None
    gpu_model: str | None
    nvlink: bool
    status: str
    """can-start | falsely-starved | short | unsatisfiable | held | topology-unknown"""
    reason: str | None = None
    """for falsely-starved: spatial | topology | configuration"""
    free_matching: int = 0
    """Free GPUs on nodes that could ever host this job (partition, model, topology)."""
    free_in_partition: int = 0
    message: str = ""
    diagnosis: tuple[NodeDiagnosis, ...] = ()
    diagnosis_more: int = 0
    """Nodes left out of ``diagnosis`` (an unsatisfiable job lists only a few examples)."""


def request_text(p: PendingStatus) -> str:
    """A pending job's GPU request in a few words, e.g. ``1x3 nvlink`` or ``6 any a100``."""
    shape = f"{p.nodes}x{p.gpus_per_node}" if p.gpus_per_node else f"{p.gpus} any"
    return shape + (f" {p.gpu_model}" if p.gpu_model else "") + (" nvlink" if p.nvlink else "")


class FragReport(_Out):
    schema_version: int = 1
    cluster: str
    taken_at: datetime
    mix: WorkloadMix
    cluster_metrics: GroupMetrics
    partitions: tuple[GroupMetrics, ...]
    models: tuple[GroupMetrics, ...]
    nodes: tuple[NodeMetrics, ...]
    pending: tuple[PendingStatus, ...]
    topology_unknown: tuple[str, ...] = ()
    """GPU nodes of unknown NVLink topology (no source gave it; modelled without NVLink)."""
    topology_sources: dict[str, int] = {}
    """GPU nodes per topology source (gres.conf, map, collector, template, snapshot, unknown)."""

    @property
    def falsely_starved(self) -> tuple[PendingStatus, ...]:
        return tuple(p for p in self.pending if p.status == "falsely-starved")
