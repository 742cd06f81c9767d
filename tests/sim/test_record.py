"""The simulator's run stored as the service's history (sim/record.py), and the causes
report reading a simulated month back: the planted cause comes first."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from simkit import job, node
from sqlalchemy import func, select

from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.defrag import DefragPlan, DefragView
from slurm_defrag.sim.engine import Engine, EngineConfig
from slurm_defrag.sim.frag import typical_types
from slurm_defrag.sim.placement.base import PolicyContext
from slurm_defrag.sim.placement.registry import build
from slurm_defrag.sim.record import HistoryRecorder, dry_run_then_enforce
from slurm_defrag.sim.snapshot_view import EPOCH
from slurm_defrag.store import migrate
from slurm_defrag.store.causes import load_causes
from slurm_defrag.store.database import Store
from slurm_defrag.store.engine import make_engine
from slurm_defrag.store.models import JobRun, Plan, PlanStep, Snapshot
from slurm_defrag.store.repo import Repository

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    url = f"sqlite:///{tmp_path / 'sim.db'}"
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    with Store.open(url) as s:
        yield s


class _RequeueOldest:
    """Asks to requeue the longest-running job at every cycle."""

    name = "requeue-oldest"

    def plan(self, view: DefragView) -> DefragPlan:
        oldest = min(view.running, key=lambda j: view.running[j].start)
        return DefragPlan(requeue=(oldest,))


def test_snapshots_modes_runs_and_plans_are_stored(store: Store) -> None:
    jobs = [
        job(f"j{i}", num=1 + i % 3, submit=600.0 * i, duration=5400.0, user=f"u{i % 3}",
            account="acct-a" if i % 2 else "acct-b")
        for i in range(24)
    ]  # fmt: skip
    nodes = [node("n0", 4, topology="nvswitch-4"), node("n1", 4, topology="nvswitch-4")]
    state = ClusterState(nodes)
    policy = build("first-fit", PolicyContext(state, typical_types(jobs), np.arange(state.size)))
    recorder = HistoryRecorder(Repository(store), dry_run_then_enforce(4 * 3600.0), cluster="s")
    cfg = EngineConfig(lever_interval=600.0, defrag_interval=1800.0, time_limit=8 * 3600.0)
    engine = Engine(state, jobs, policy, np.random.default_rng(0),
                    recorder.step(_RequeueOldest()), cfg, levers=recorder)  # fmt: skip
    recorder.attach(engine)
    stats = engine.run()
    with store.engine.connect() as conn:
        modes = list(conn.execute(select(Snapshot.t, Snapshot.mode).order_by(Snapshot.t)))
        runs = conn.execute(select(JobRun.job_id, JobRun.account, JobRun.user, JobRun.submit_t,
                                   JobRun.run)).all()  # fmt: skip
        plans = conn.execute(select(Plan.mode, func.count()).group_by(Plan.mode)).all()
        requeued = conn.scalar(
            select(func.count()).select_from(PlanStep).join(Plan, Plan.id == PlanStep.plan_id)
            .where(Plan.mode == "enforce", PlanStep.action == "requeue")
        )  # fmt: skip
    assert recorder.saved == len(modes) >= 25
    switch = (EPOCH + timedelta(hours=4)).timestamp()
    assert all(m == ("dry-run" if t < switch else "enforce") for t, m in modes)
    # every job that started is on record with the simulator's own submit time
    first = {r.job_id: r for r in runs if r.run == 0}
    for i, rec in enumerate(stats.records):
        if rec.first_start is not None and rec.first_start < modes[-1][0] - EPOCH.timestamp():
            assert first[str(i)].submit_t == EPOCH.timestamp() + jobs[i].submit
            assert first[str(i)].account == jobs[i].account
            assert first[str(i)].user == jobs[i].user
    # plans of both modes recorded; only the enforce ones requeued anything
    assert dict(plans).keys() == {"dry-run", "enforce"}
    assert stats.requeues == requeued > 0
    assert any(r.run > 0 for r in runs)  # a requeued job started again


@pytest.fixture(scope="module")
def sim_month() -> ModuleType:
    path = ROOT / "bench" / "sim_month.py"
    spec = importlib.util.spec_from_file_location("sim_month", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_causes_name_the_planted_cause_first(store: Store, sim_month: ModuleType) -> None:
    """A month of bench/sim_month.py: account chem's long 1-GPU jobs scattered over the
    8-GPU NVSwitch nodes strand the GPUs the 8-GPU jobs wait for. The report says so first,
    and so does each dimension's reading."""
    sim_month.run(str(store.engine.url), days=30, every_s=4 * 3600)
    end = (EPOCH + timedelta(days=30)).timestamp()
    causes = load_causes(store, 30 * 86400, now=end)
    assert causes.headline[0].name == "1-GPU jobs of account chem on 8-GPU h100 NVSwitch nodes"
    assert causes.reading.startswith("1-GPU jobs of account chem on 8-GPU h100 NVSwitch nodes: ")
    readings = {d.key: d.reading for d in causes.dimensions}
    assert readings["granularity"].startswith("1-GPU jobs: ")
    assert readings["lifecycles"].startswith("jobs with a time limit over 3 days: ")
    assert readings["topology"].startswith("8-GPU h100 NVSwitch nodes: ")
    assert causes.accounts[0].name in ("account chem", "(configuration)")
    assert next(a for a in causes.accounts if a.name != "(configuration)").name == "account chem"
    assert sum(causes.by_cause.values()) == pytest.approx(causes.stranded_gpu_hours)
