"""priority/multifactor in the engine (sim/priority.py): the queue Slurm would order."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from simkit import job, node

from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.engine import Engine, EngineConfig
from slurm_defrag.sim.fair_tree import Assoc
from slurm_defrag.sim.frag import typical_types
from slurm_defrag.sim.model import JobSpec, NodeSpec
from slurm_defrag.sim.multifactor import ClusterSize, MultifactorConfig
from slurm_defrag.sim.placement.base import PolicyContext
from slurm_defrag.sim.placement.registry import build
from slurm_defrag.sim.priority import Multifactor

CFG = MultifactorConfig(
    weight_age=1000, weight_fairshare=10000, max_age_s=3600.0, calc_period_s=60.0
)
TREE = Assoc(
    "root",
    children=(Assoc("a", children=(Assoc("a/heavy", user=True), Assoc("a/light", user=True))),),
)


def _model(history: dict[str, float] | None = None, cfg: MultifactorConfig = CFG) -> Multifactor:
    return Multifactor(cfg, TREE, ClusterSize(nodes=1, cpus=64), history)


def _run(jobs: list[JobSpec], model: Multifactor | None) -> dict[str, float | None]:
    s = ClusterState([node("n", 1)])
    pol = build("first-fit", PolicyContext(s, typical_types(jobs), np.arange(s.size)))
    eng = Engine(s, jobs, pol, np.random.default_rng(0), None, EngineConfig(), priority=model)
    stats = eng.run()
    return {j.name: r.first_start for j, r in zip(jobs, stats.records, strict=True)}


JOBS = [
    job("blocker", submit=0.0, duration=300.0, user="light", account="a"),
    job("heavy's", submit=10.0, duration=100.0, user="heavy", account="a"),
    job("light's", submit=20.0, duration=100.0, user="light", account="a"),
]


def test_without_a_model_the_queue_is_first_come_first_served() -> None:
    starts = _run(JOBS, None)
    assert starts["heavy's"] == 300.0
    assert starts["light's"] == 400.0


def test_fair_share_puts_the_light_users_later_job_first() -> None:
    starts = _run(JOBS, _model({"a/heavy": 1e6}))
    assert starts["light's"] == 300.0
    assert starts["heavy's"] == 400.0


def test_usage_charged_while_jobs_run_changes_who_goes_first() -> None:
    # nobody has used anything: both tie on fair-share, and the older job wins on age...
    jobs = [*JOBS[:2], job("light's", submit=20.0, duration=100.0, user="light", account="a")]
    assert _run(jobs, _model())["heavy's"] == 300.0
    # ...unless the blocker's usage (light's, charged every 60 s) has put light below
    # heavy by then: with the blocker billed to heavy instead, light's job goes first
    jobs[0] = job("blocker", submit=0.0, duration=300.0, user="heavy", account="a")
    assert _run(jobs, _model())["light's"] == 300.0


def test_a_pending_job_gains_age_at_every_recalculation() -> None:
    m = _model()
    j = job("x", user="light", account="a", priority=0)
    first = m.submitted(0, j, now=0.0)
    again = m.recalc(1800.0, [(0, j)])
    assert first == 10000  # no usage anywhere: both users tie at the top (factor 1)
    assert again == {0: 10000 + 500}  # half of PriorityMaxAge


def test_the_boost_job_submit_lua_set_is_added_as_a_negative_nice() -> None:
    m = _model()
    assert m.submitted(0, job("x", user="light", account="a", priority=2500), now=0.0) == 12500


def test_a_requeued_job_accrues_age_again_from_its_requeue() -> None:
    m = _model()
    j = job("x", user="light", account="a")
    m.submitted(0, j, now=0.0)
    m.started(0, j, now=1800.0)
    m.stopped(0, j, now=2000.0, requeued=True)
    # no age (accrued from 2000 s on); its 200 s of usage rank light below heavy (1 of 2)
    assert m.recalc(2000.0, [(0, j)])[0] == 5000


def test_a_job_of_an_unknown_association_is_refused() -> None:
    with pytest.raises(ValueError, match="no association"):
        _model().submitted(0, job("x", user="nobody", account="a"), now=0.0)


def test_age_alone_keeps_first_come_first_served(
    small_nodes: list[NodeSpec], small_trace: list[JobSpec]
) -> None:
    """With every weight but age at 0 the older job always ranks first: the engine with the
    model starts every job when the engine without one does."""
    jobs = [replace(j, user="light", account="a") for j in small_trace]
    age_only = MultifactorConfig(weight_age=1000, max_age_s=100.0, calc_period_s=7.0)
    s = ClusterState(small_nodes)
    types = typical_types(jobs)

    def starts(model: Multifactor | None) -> list[float | None]:
        state = ClusterState(small_nodes)
        pol = build("first-fit", PolicyContext(state, types, np.arange(state.size)))
        eng = Engine(
            state, jobs, pol, np.random.default_rng(0), None, EngineConfig(), priority=model
        )
        return [r.first_start for r in eng.run().records]

    cluster = ClusterSize(nodes=s.size, cpus=64)
    assert starts(Multifactor(age_only, TREE, cluster)) == starts(None)
