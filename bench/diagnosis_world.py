"""The Protocol B world the diagnosis scripts replay, as ``sim_protocol_b.py --backfill all
--user-limits --ckpt-share 0.25`` runs it: scaled cluster, jobs, settings."""

from __future__ import annotations

import argparse

import numpy as np

import repo_traces  # noqa: F401  (sets SLURM_DEFRAG_TRACES for a checkout)
from slurm_defrag import suite
from slurm_defrag.sim import protocol_b as pb
from slurm_defrag.sim.model import JobSpec, NodeSpec
from slurm_defrag.sim.timed_workload import durations_by_gpus
from slurm_defrag.traces import openb


def diagnosis_world(
    workload: str, load: float
) -> tuple[list[NodeSpec], list[JobSpec], pb.SettingsB]:
    s = suite.Suite(trace=workload, backfill="all")
    nodes, jobs = suite.load(s, None)
    if not any(j.duration for j in jobs):
        # multigpu*: run times per GPU count from the default trace, as suite.protocol_b does
        jobs = durations_by_gpus(jobs, openb.load_pods("default", None), np.random.default_rng(0))
    settings = pb.SettingsB(
        horizon=s.horizon_h * 3600,
        warmup=s.warmup_h * 3600,
        max_runtime=s.max_runtime_h * 3600,
        load=load,
        user_limits=True,
        ckpt_share=0.25,
        engine=suite.engine_config("all"),
    )
    return list(suite.scale_cluster(nodes, s.scale)), list(jobs), settings


def world_parser(doc: str, workload: str, load: float, seeds: int) -> argparse.ArgumentParser:
    """The options every diagnosis script takes (workload, load, seeds), its own defaults;
    the description is the docstring's second line."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[1])
    ap.add_argument("--workload", default=workload)
    ap.add_argument("--load", type=float, default=load)
    ap.add_argument("--seeds", type=int, default=seeds)
    ap.add_argument("--first-seed", type=int, default=42)
    return ap
