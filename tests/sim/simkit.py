"""Builders for tiny synthetic nodes and jobs (import as ``from simkit import job, node``)."""

from __future__ import annotations

from slurm_defrag.sim.model import JobSpec, NodeSpec


def node(
    name: str,
    gpus: int = 8,
    cpu: int = 64_000,
    mem: int = 256_000,
    model: str = "A",
    topology: str | None = None,
) -> NodeSpec:
    return NodeSpec(
        name=name, cpu_milli=cpu, memory_mib=mem, gpus=gpus, model=model, topology=topology
    )


def job(
    name: str,
    num: int = 1,
    milli: int = 1000,
    cpu: int = 4000,
    mem: int = 8000,
    submit: float = 0.0,
    duration: float = 100.0,
    **kw: object,
) -> JobSpec:
    return JobSpec(
        name=name,
        cpu_milli=cpu,
        memory_mib=mem,
        num_gpu=num,
        gpu_milli=milli if num else 0,
        submit=submit,
        duration=duration,
        **kw,
    )  # type: ignore[arg-type]
