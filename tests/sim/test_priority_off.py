"""Without a priority model Protocol B is the simulator of before issue #41, run for run.

The figures below were produced by commit 1128967 (prio41's parent on main, before the
priority model, the users and the per-class statistics existed); the engine and
Protocol B must keep giving them with ``priority="none"``, so every earlier figure in
docs/benchmarks.md stays reproducible.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_defrag.sim.configuration import RunConfig, from_profile, plain
from slurm_defrag.sim.model import JobSpec, NodeSpec
from slurm_defrag.sim.planner_step import make_step
from slurm_defrag.sim.profile import load_profile
from slurm_defrag.sim.protocol_b import SettingsB, run_b
from slurm_defrag.suite import engine_config

BEFORE = {
    ("first-fit", "none", "head", 3): (
        336, 426.7787274817773, 615.7804398014521, 94.10814873161355, 236, 0,
    ),
    ("first-fit", "none", "all", 4): (
        360, 815.0161882297689, 989.2210071308853, 93.33503198181917, 228, 0,
    ),
    ("short-first-all", "one-configuration", "all", 4): (
        360, 1137.547959522557, 95.83078995655514, 90.79029688563224, 143, 26,
    ),
}  # fmt: skip
"""(placement, defrag, backfill, seed) -> (jobs, mean wait, large-job mean wait, GPU
allocation %, backfilled, holds). Measured with the strings the profiles replaced:
``slurm+shape-weights~short-all`` (examples/profiles/short-first-all.toml) with
``planner-gain@4/0.5`` (examples/profiles/one-configuration.toml's [defrag])."""
PROFILES = Path(__file__).resolve().parents[2] / "examples" / "profiles"


@pytest.mark.parametrize(("policy", "defrag", "backfill", "seed"), list(BEFORE))
def test_no_priority_gives_the_figures_of_before(
    small_nodes: list[NodeSpec],
    small_trace: list[JobSpec],
    policy: str,
    defrag: str,
    backfill: str,
    seed: int,
) -> None:
    s = SettingsB(
        load=1.3,
        horizon=3600.0,
        warmup=600.0,
        max_runtime=600.0,
        user_limits=True,
        ckpt_share=0.5,
        engine=engine_config(backfill),
    )
    placement = plain(policy) if policy == "first-fit" else _profile(policy).placement
    step = None
    if defrag != "none":
        config = _profile(defrag)
        step = make_step(config.step, config.limits)
    r = run_b(small_nodes, small_trace, placement, seed=seed, settings=s, defrag=step)
    got = (r.jobs, r.wait_mean_s, r.large_wait_mean_s, r.gpu_alloc_pct, r.backfilled, r.holds)
    assert got == pytest.approx(BEFORE[(policy, defrag, backfill, seed)], rel=1e-12)


def _profile(name: str) -> RunConfig:
    return from_profile(load_profile(PROFILES / f"{name}.toml"))
