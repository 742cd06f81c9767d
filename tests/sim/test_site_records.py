"""``run_b_site(on_engine=...)``: the per-job records a replay comparison needs
(bench/slurm_replay_bench.py compares each job's start with Slurm's)."""

from __future__ import annotations

from simkit import job

from slurm_defrag.sim.engine import Engine
from slurm_defrag.sim.model import NodeSpec
from slurm_defrag.sim.protocol_b import SettingsB, run_b_site


def test_the_engine_is_handed_over_with_every_jobs_start(small_nodes: list[NodeSpec]) -> None:
    # more GPUs asked at 0 than the nodes have: the late ones start when others end
    gpus = sum(n.gpus for n in small_nodes)
    jobs = [job(f"j{i}", num=1, submit=float(i), duration=60.0) for i in range(gpus + 2)]
    seen: list[Engine] = []
    s = SettingsB(load=1.0, horizon=float(gpus + 3), warmup=0.0, max_runtime=60.0)
    r = run_b_site(small_nodes, jobs, "first-fit", seed=1, settings=s, on_engine=seen.append)
    (engine,) = seen
    records = zip(engine.jobs, engine.stats.records, strict=True)
    starts = {j.name: rec.first_start for j, rec in records}
    assert starts["j0"] == 0.0
    assert starts[f"j{gpus + 1}"] == 61.0  # j1's GPU, free at 61
    assert r.jobs == len(jobs)
