"""An NVLink topology laid over trace nodes, which carry none.

``nvlink`` (documented in docs/benchmarks.md, "Simulator"): 8-GPU nodes are NVSwitch
(every subset of GPUs is an NVLink block), 4- and 2-GPU nodes are PCIe cards bridged in
NVLink pairs (blocks of 2: GPUs 0-1, 2-3), 1-GPU nodes have no NVLink. ``none``: every
node PCIe only. The overlay changes which GPUs slurm-defrag's packing takes, and, with
``nvlink_jobs``, where multi-GPU jobs may run at all.
"""

from __future__ import annotations

from dataclasses import replace

from slurm_defrag.errors import InputError
from slurm_defrag.sim.model import JobSpec, NodeSpec

OVERLAYS: dict[str, dict[int, str]] = {
    "none": {},
    "nvlink": {8: "nvswitch-8", 4: "nvlink-pairs-4", 2: "nvlink-pairs-2"},
}


def apply_overlay(nodes: list[NodeSpec], overlay: str) -> list[NodeSpec]:
    try:
        table = OVERLAYS[overlay]
    except KeyError:
        raise InputError(f"overlay {overlay!r}: choose from {', '.join(OVERLAYS)}") from None
    return [replace(n, topology=table.get(n.gpus)) for n in nodes]


def require_nvlink(jobs: list[JobSpec]) -> list[JobSpec]:
    """Every job with two or more GPUs must get one NVLink block."""
    return [replace(j, nvlink=True) if j.num_gpu > 1 else j for j in jobs]
