"""Diagnosis: are Protocol B's 8-GPU jobs waiting for fragmentation or for capacity?

    .venv/bin/python bench/sim_large_queue.py [--seeds 6] [--load 0.9] [--policy first-fit]
        [--workload default|multigpu50]

Replays Protocol B as ``sim_protocol_b.py --backfill all --user-limits --ckpt-share 0.25``
does (no defrag) and, once a minute of the measured window, while an 8-GPU job is
pending, samples: how many 8-GPU jobs are pending, the whole free GPUs on the 8-GPU nodes
and on all GPU nodes, and the cheapest way to empty an 8-GPU node by requeue (GPU-hours
lost since start or last checkpoint; nodes holding a job of >= 4 GPUs, never a victim,
are left out). If the queue is long while free GPUs add up to few nodes, the large jobs
queue for capacity, which no consolidation can give them.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import numpy as np

from diagnosis_world import diagnosis_world
from slurm_defrag.sim import protocol_b as pb
from slurm_defrag.sim.defrag import RunningJob
from slurm_defrag.sim.protocol_b import LARGE_GPUS

WHOLE = 1000  # milli-GPU: a GPU with this much left is wholly free
NODE_GPUS = 8


@dataclass
class Samples:
    pending: list[int] = field(default_factory=list)
    free_big: list[int] = field(default_factory=list)
    free_all: list[int] = field(default_factory=list)
    cheapest: list[float] = field(default_factory=list)
    emptiable: list[int] = field(default_factory=list)
    """8-GPU nodes with work on them but no job of >= 4 GPUs (a requeue could empty them)."""


def _probe(samples: Samples, window: tuple[float, float]) -> type[pb.Engine]:
    class Probe(pb.Engine):
        _last = -1e18

        def _backfill(self) -> None:
            if self.now - self._last >= 60 and window[0] <= self.now < window[1]:
                self._last = self.now
                self._sample()
            super()._backfill()

        def _sample(self) -> None:
            waiting = sum(self.jobs[j].num_gpu == NODE_GPUS for _, _, j in self.pending)
            if not waiting:
                return
            by_node: dict[int, list[RunningJob]] = {}
            for r in self.running.values():
                by_node.setdefault(r.where.node, []).append(r)
            s, costs, movable = self.state, [], 0
            big = [n for n in range(s.size) if int(s.gpu_count[n]) == NODE_GPUS]
            for n in big:
                here = by_node.get(n, [])
                if any(r.job.num_gpu >= LARGE_GPUS for r in here):
                    continue
                movable += bool(here)
                lost = 0.0
                for r in here:
                    ckpt = r.last_checkpoint(self.now)
                    since = r.start if ckpt is None else max(r.start, ckpt)
                    gpus = max(r.job.num_gpu, r.job.gpu_milli / WHOLE)
                    lost += gpus * (self.now - since) / 3600
                costs.append(lost)
            gpu_nodes = [n for n in range(s.size) if int(s.gpu_count[n])]
            samples.pending.append(waiting)
            samples.free_big.append(sum(int((s.gpu_left[n] == WHOLE).sum()) for n in big))
            samples.free_all.append(sum(int((s.gpu_left[n] == WHOLE).sum()) for n in gpu_nodes))
            samples.cheapest.append(min(costs, default=float("nan")))
            samples.emptiable.append(movable)

    return Probe


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--load", type=float, default=0.9)
    ap.add_argument("--policy", default="first-fit")
    ap.add_argument("--workload", default="default", help="openb pod list: default, multigpu50")
    args = ap.parse_args()
    nodes, jobs, settings = diagnosis_world(args.workload, args.load)
    print(
        "seed | large wait (h) | 8-GPU jobs pending | whole free GPUs on 8-GPU nodes | "
        "on all GPU nodes | 8-GPU nodes a requeue could empty | "
        "cheapest of them, GPU-h (p25/p50/p75) | minutes sampled"
    )
    original = pb.Engine
    try:
        for seed in range(42, 42 + args.seeds):
            got = Samples()
            pb.Engine = _probe(got, (settings.warmup, settings.horizon))  # type: ignore[misc]
            res = pb.run_b(nodes, jobs, args.policy, seed, settings)
            q = np.nanpercentile(got.cheapest, [25, 50, 75])
            print(
                f"{seed} | {res.large_wait_mean_s / 3600:.2f} | {np.mean(got.pending):.1f} | "
                f"{np.mean(got.free_big):.1f} | {np.mean(got.free_all):.1f} | "
                f"{np.mean(got.emptiable):.1f} | "
                f"{q[0]:.2f} / {q[1]:.2f} / {q[2]:.2f} | {len(got.pending)}"
            )
    finally:
        pb.Engine = original  # type: ignore[misc]


if __name__ == "__main__":
    main()
