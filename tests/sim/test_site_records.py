"""``run_b_site(on_engine=...)``: the per-job records a replay comparison needs
(bench/slurm_replay_bench.py compares each job's start with Slurm's)."""

from __future__ import annotations

from simkit import job

from slurm_defrag.sim.engine import Engine, EngineConfig
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


def test_main_passes_at_most_every_sched_min_interval(small_nodes: list[NodeSpec]) -> None:
    # EngineConfig.sched_min_interval: x's submit at 0 gets a pass at once; y's, 1 s later,
    # waits for the next pass the interval allows (5 s after x's), an empty cluster or not
    jobs = [job("x", submit=0.0, duration=60.0), job("y", submit=1.0, duration=60.0)]
    starts = {}
    for gap in (0.0, 5.0):
        cfg = EngineConfig(bf_interval=1000.0, sched_min_interval=gap)
        s = SettingsB(load=1.0, horizon=2.0, warmup=0.0, max_runtime=100.0, engine=cfg)
        seen: list[Engine] = []
        run_b_site(small_nodes, jobs, "first-fit", seed=1, settings=s, on_engine=seen.append)
        (engine,) = seen
        starts[gap] = [rec.first_start for rec in engine.stats.records]
    assert starts[0.0] == [0.0, 1.0]
    assert starts[5.0] == [0.0, 5.0]
