"""A job no node could ever hold is refused at submit (sim/engine.py, issue #41 item 4):
queued, it waited for ever and Protocol B never ended (openb's gpuspec* variants)."""

from __future__ import annotations

import json

import numpy as np
from simkit import job, node

from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.engine import Engine
from slurm_defrag.sim.model import JobSpec, NodeSpec
from slurm_defrag.sim.placement.base import PolicyContext
from slurm_defrag.sim.placement.registry import build
from slurm_defrag.sim.protocol_b import SettingsB, run_b, run_b_site
from slurm_defrag.sim.report import refused_line, to_json

NODES = [node("a0", 8), node("b0", 4, model="B", cpu=16_000)]


def _engine(jobs: list[JobSpec]) -> Engine:
    state = ClusterState(NODES)
    chooser = build("first-fit", PolicyContext(state, [], np.arange(state.size, dtype=np.int64)))
    return Engine(state, jobs, chooser, np.random.default_rng(0))


def test_what_no_node_holds_is_refused_and_the_rest_runs() -> None:
    jobs = [
        job("fits", num=4),
        job("model", num=1, gpu_models=frozenset({"C"})),  # no node has GPU model C
        job("gpus", num=9),  # more GPUs than any node
        job("cpus", num=0, milli=0, cpu=65_000),  # more CPUs than any node
        job("mem", num=0, milli=0, mem=300_000),
        job("b-cpus", num=2, cpu=20_000, gpu_models=frozenset({"B"})),  # B nodes have 16 CPUs
        job("later", num=8, submit=10.0),
    ]
    engine = _engine(jobs)
    stats = engine.run()
    refused = [j.name for j, r in zip(jobs, stats.records, strict=True) if r.refused]
    assert refused == ["model", "gpus", "cpus", "mem", "b-cpus"]
    assert stats.refused == 5
    assert stats.records[0].end is not None
    assert stats.records[-1].end is not None
    assert not engine.pending


def test_an_nvlink_job_needs_a_block_some_node_has() -> None:
    state = ClusterState([node("p", 4)])  # PCIe only: no NVLink block of 2
    assert not state.could_hold(job("nv", num=2, nvlink=True))
    assert state.could_hold(job("any", num=2))
    assert ClusterState([node("s", 8, topology="nvswitch-8")]).could_hold(
        job("nv", num=8, nvlink=True)
    )


def test_protocol_b_ends_and_counts_the_refused_jobs(small_nodes: list[NodeSpec]) -> None:
    trace = [job(f"p{i}", num=1 + i % 2, duration=120.0) for i in range(20)]
    trace.append(job("impossible", num=1, gpu_models=frozenset({"Z"}), duration=120.0))
    s = SettingsB(load=1.0, horizon=3600.0, warmup=0.0, max_runtime=600.0)
    r = run_b(small_nodes, trace, "first-fit", seed=1, settings=s)
    assert r.refused > 0
    assert r.unfinished == 0
    assert json.loads(to_json("B", {}, [r]))["runs"][0]["refused"] == r.refused
    assert "refused at submit" in (refused_line([r]) or "")


def test_a_run_that_refuses_nothing_keeps_its_json_keys(small_nodes: list[NodeSpec]) -> None:
    jobs = [job(f"j{i}", num=1, submit=10.0 * i, duration=60.0) for i in range(10)]
    s = SettingsB(load=0.5, horizon=100.0, warmup=0.0, max_runtime=60.0)
    r = run_b_site(small_nodes, jobs, "first-fit", seed=1, settings=s)
    assert (r.refused, r.jobs, r.unfinished) == (0, 10, 0)
    assert "refused" not in json.loads(to_json("B", {}, [r]))["runs"][0]
    assert refused_line([r]) is None
