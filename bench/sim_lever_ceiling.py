"""Diagnostic (issue #14): how far a Slurm-executable lever can get in Protocol A.

    .venv/bin/python bench/sim_lever_ceiling.py [--seeds 1]

Runs ``packing`` beside diagnostic variants that keep one of its choices and replace the
other by what cons_tres does, so the gap between the levers (slurm mode) and ``packing``
can be split into its causes:

* ``packing/lowest-gpu`` — packing's node, but the GPUs cons_tres takes on it (lowest
  index with room, :func:`slurm_defrag.sim.gpus.lowest`): the part of packing's gain that
  comes from choosing the GPU inside the node, which no Slurm lever controls.

* ``packing/cpu-first-fit`` — packing for GPU jobs, cons_tres order for CPU-only jobs
  (the levers steer GPU requests only): what steering CPU-only jobs is worth.
* ``packing/gpu-first-fit`` — the reverse: packing for CPU-only jobs only.

Not a product policy: registered here only, for this measurement.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from rich.console import Console

import repo_traces  # noqa: F401  (sets SLURM_DEFRAG_TRACES for a checkout)
from slurm_defrag import suite
from slurm_defrag.sim import gpus, report
from slurm_defrag.sim.cluster import BoolArray, ClusterState
from slurm_defrag.sim.model import JobSpec, Placement
from slurm_defrag.sim.policies.packing import Packing
from slurm_defrag.sim.policies.registry import POLICIES
from slurm_defrag.sim.policies.slurm_select import first_in_order


class PackingLowestGpu(Packing):
    name = "packing/lowest-gpu"

    def choose(
        self, state: ClusterState, job: JobSpec, feasible: BoolArray, rng: np.random.Generator
    ) -> Placement | None:
        chosen = super().choose(state, job, feasible, rng)
        if chosen is None:
            return None
        return Placement(chosen.node, gpus.lowest(state, chosen.node, job))


class PackingCpuFirstFit(Packing):
    name = "packing/cpu-first-fit"
    packs_cpu_only = False

    def choose(
        self, state: ClusterState, job: JobSpec, feasible: BoolArray, rng: np.random.Generator
    ) -> Placement | None:
        if (job.num_gpu == 0) == self.packs_cpu_only:
            return super().choose(state, job, feasible, rng)
        node = first_in_order(state, feasible)
        return None if node is None else Placement(node, gpus.lowest(state, node, job))


class PackingGpuFirstFit(PackingCpuFirstFit):
    name = "packing/gpu-first-fit"
    packs_cpu_only = True


DIAGNOSTIC = (PackingLowestGpu, PackingCpuFirstFit, PackingGpuFirstFit)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--seeds", type=int, default=1)
    args = ap.parse_args()
    for policy in DIAGNOSTIC:
        POLICIES[policy.name] = policy
    s = suite.Suite(
        overlay="none",
        nvlink_jobs=False,
        seeds=tuple(range(42, 42 + args.seeds)),
        policies=("first-fit", "packing", *(p.name for p in DIAGNOSTIC)),
        defrag=("none",),
    )
    t0 = time.perf_counter()
    runs = suite.protocol_a(s)
    console = Console(width=160)
    console.print(report.table_a(runs, "Protocol A — openb default, lever ceiling", False))
    console.print(f"{len(runs)} runs in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
