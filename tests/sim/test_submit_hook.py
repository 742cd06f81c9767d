"""job_submit.lua, the real script through lupa, gives the --prefer the slurm mode uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_defrag.errors import InputError
from slurm_defrag.packing.fit_classes import Mix, TaskClass
from slurm_defrag.packing.node_levers import LeverSettings, short_first_entry
from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.configuration import configure
from slurm_defrag.sim.levers import SlurmMode, short_first_of
from slurm_defrag.sim.model import JobSpec, NodeSpec
from slurm_defrag.sim.protocol_a import run_a
from slurm_defrag.sim.submit_hook import SubmitHook, node_table

STATE = ClusterState([NodeSpec("a", 8000, 1000, 8, "v100"), NodeSpec("b", 8000, 1000, 2, "t4")])


def _hook(lever: str, mix: Mix | None = None) -> SubmitHook:
    return SubmitHook(node_table(STATE, LeverSettings(lever, mix=mix)))


def _job(gpus: int, milli: int) -> JobSpec:
    return JobSpec("j", 1000, 10, gpus, milli)


def test_no_fit_features_no_prefer() -> None:
    hook = _hook("weight-tiers")
    assert [hook.prefer(_job(g, 1000)) for g in (1, 2, 8)] == [None, None, None]
    assert hook.prefer(_job(1, 300)) is None


def test_fit_classes_by_gpu_count_and_shards() -> None:
    hook = _hook("fit-features")
    assert hook.prefer(_job(1, 1000)) == "defrag_fit1"
    assert hook.prefer(_job(4, 1000)) == "defrag_fit4"
    assert hook.prefer(_job(3, 1000)) is None  # not a class
    assert hook.prefer(_job(1, 300)) == "defrag_fitshard"
    assert hook.prefer(JobSpec("cpu", 1000, 10)) == "defrag_fitcpu"  # CPUs only
    assert _hook("weight-tiers").prefer(JobSpec("cpu", 1000, 10)) is None


def test_shard_sizes_round_up_to_the_next_class() -> None:
    mix = Mix((TaskClass(2, 1, 250, 1.0), TaskClass(2, 1, 500, 1.0), TaskClass(2, 1, 1000, 1.0)))
    hook = _hook("fgd-tiers", mix)
    assert hook.prefer(_job(1, 250)) == "defrag_fitshard250"
    assert hook.prefer(_job(1, 300)) == "defrag_fitshard500"
    assert hook.prefer(_job(1, 600)) is None  # above every class: no hint
    assert hook.prefer(_job(2, 1000)) == "defrag_fit2"


def test_cached_per_request_shape() -> None:
    hook = _hook("fit-features")
    for _ in range(5):
        hook.apply(_job(1, 1000))
    assert hook.calls == 1
    assert hook.apply(_job(2, 1000)).prefer == "defrag_fit2"


def test_script_path_from_the_environment_must_exist(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from slurm_defrag.sim.submit_hook import SCRIPT_ENV, default_script

    monkeypatch.setenv(SCRIPT_ENV, str(tmp_path / "missing.lua"))
    with pytest.raises(InputError, match=SCRIPT_ENV):
        default_script()


def test_short_first_raises_the_priority_of_jobs_only_scarce_nodes_hold() -> None:
    """~short: the script's negative nice (its time limit in minutes minus a week) becomes
    a priority boost, for a job only the one big node of ten holds; the table carries each
    type's CPUs and memory, so a job that the nine small nodes hold is left alone."""
    nodes = [NodeSpec(f"s{i}", 96_000, 393_216, 8, "g2") for i in range(9)]
    state = ClusterState([*nodes, NodeSpec("big", 128_000, 786_432, 8, "g3")])
    hook = SubmitHook(
        node_table(state, LeverSettings("shape-weights"), short_first=short_first_entry(0.1))
    )
    big = JobSpec("j", 120_000, 500_000, 8, 1000, time_limit=5400.0)
    assert hook.apply(big).priority == 2 * 10_080 + 10_080 - 90
    unlimited = JobSpec("j", 120_000, 500_000, 8, 1000)
    assert hook.apply(unlimited).priority == 2 * 10_080  # no limit: the tier alone
    small = JobSpec("j", 64_000, 100_000, 8, 1000, time_limit=5400.0)
    assert hook.apply(small) == small
    plain = SubmitHook(node_table(state, LeverSettings("shape-weights")))
    assert plain.apply(big) == big


SHAPE = {"lever": "shape-weights"}
SHORT = {"short_first": 0.1}
SHORT_ALL = {"short_first": 0.1, "short_first_all": True, "large_first": 4}


def _mode(**job_submit: object) -> SlurmMode | None:
    return configure(placement=SHAPE, job_submit=job_submit).placement.mode


def test_short_first_in_a_profile() -> None:
    mode = _mode(**SHORT)
    assert mode is not None
    assert mode.short_first == "scarce"
    assert mode.lever.lever == "shape-weights"
    assert short_first_of(mode) == {"share": 0.1, "span": 10_080}
    every = _mode(**SHORT_ALL)
    assert every is not None
    assert every.lever.lever == "shape-weights"
    assert short_first_of(every) == {"share": 0.1, "span": 10_080, "all": True, "large_gpus": 4}
    assert _mode().short_first is None  # type: ignore[union-attr]
    placement = configure(placement=SHAPE, job_submit=SHORT).placement
    with pytest.raises(InputError, match="Protocol A"):
        run_a(list(STATE.nodes), [_job(1, 1000)], placement, 1)


def test_keep_scarce_excludes_the_big_nodes_from_other_jobs() -> None:
    """keep_scarce: the big-CPU variant of the common 8-GPU node is kept for the jobs only it
    holds; the script's --exclude reaches the job and the simulator honours it."""
    nodes = [NodeSpec(f"s{i}", 96_000, 393_216, 8, "g2") for i in range(9)]
    state = ClusterState([*nodes, NodeSpec("big", 128_000, 786_432, 8, "g3")])
    mode = _mode(**SHORT_ALL, keep_scarce=0)
    assert mode is not None
    assert mode.keep == 0
    assert mode.short_first == "all"
    entry = short_first_of(mode)
    assert entry is not None
    assert entry["keep"] == {"demand": 0.0, "window": 360}
    hook = SubmitHook(node_table(state, mode.lever, short_first=entry))
    small = hook.apply(JobSpec("j", 8_000, 1_000, 1, 1000, time_limit=600.0))
    assert small.exclude == frozenset({"big"})
    assert list(state.feasible(small)) == [True] * 9 + [False]
    big = hook.apply(JobSpec("j", 120_000, 500_000, 8, 1000, time_limit=600.0))
    assert big.exclude is None
    assert state.feasible(big)[9]
    with pytest.raises(InputError, match=r"job_submit.keep_scarce: needs short_first"):
        _mode(keep_scarce=0.5)


def test_keep_under_demand_follows_the_scarce_submissions_in_sim_time() -> None:
    """keep_scarce: other jobs are kept off the big node only while the scarce jobs submitted in
    the last six hours (by the simulator's clock) ask for half its time or more."""
    nodes = [NodeSpec(f"s{i}", 96_000, 393_216, 8, "g2") for i in range(9)]
    state = ClusterState([*nodes, NodeSpec("big", 128_000, 786_432, 8, "g3")])
    mode = _mode(**SHORT, keep_scarce=0.5)
    assert mode is not None
    assert mode.keep == 0.5
    hook = SubmitHook(node_table(state, mode.lever, short_first=short_first_of(mode)))

    def small(t: float) -> JobSpec:
        return hook.apply(JobSpec("s", 8_000, 1_000, 1, 1000, submit=t, time_limit=600.0))

    assert small(0).exclude is None
    big = JobSpec("b", 120_000, 500_000, 8, 1000, submit=10.0, time_limit=4 * 3600.0)
    assert hook.apply(big).exclude is None  # 4 h of the 6 h window: 0.67
    assert small(20).exclude == frozenset({"big"})
    assert hook.keep_level(20) == pytest.approx(4 / 6)  # what the script decided on
    assert small(10 + 6 * 3600).exclude is None  # aged out
