"""A simulated run stored as the service's history: snapshots, metrics, modes and plans.

The reports (``history``, ``report impact``, ``report causes``) read a database the
service writes; this writes one from the simulator instead, so a month of a synthetic
workload can be read as a site's month. :class:`HistoryRecorder` is the engine's periodic
hook (``Engine(levers=recorder)``, every ``EngineConfig.lever_interval`` seconds): it turns
the cluster into a snapshot (:func:`slurm_defrag.sim.snapshot_view.to_snapshot`, with every
pending whole-GPU job and each job's user and account), measures it and saves it with the
mode the service would be in at that time. :meth:`HistoryRecorder.step` wraps a defrag step
so each plan it makes is recorded as the service records its plans: its requeues as done
steps with the GPU-hours they cost; in dry-run the plan is recorded and nothing happens.

Times are the simulator's, from :data:`~slurm_defrag.sim.snapshot_view.EPOCH` on. GPUs
shared by fractional jobs show as busy without a job (``gpus_used``), as in the planner's
view.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.metrics.cache import MetricsCache
from slurm_defrag.metrics.compute import compute
from slurm_defrag.sim.defrag import DefragPlan, DefragStep, DefragView, requeue_limit
from slurm_defrag.sim.snapshot_view import ViewOptions, at, to_snapshot
from slurm_defrag.store.plans import NewStep
from slurm_defrag.store.repo import Repository

if TYPE_CHECKING:
    from slurm_defrag.sim.engine import Engine

Mode = Callable[[float], str]
"""Simulated seconds -> the service's mode then (``dry-run`` or ``enforce``)."""


def dry_run_then_enforce(switch_s: float) -> Mode:
    """Dry-run before ``switch_s``, enforce from then on: a site's first weeks."""
    return lambda t: "dry-run" if t < switch_s else "enforce"


class HistoryRecorder:
    """Stores a snapshot of the engine's cluster each time it is called (module docstring)."""

    def __init__(self, repo: Repository, mode: Mode, *, cluster: str = "simulator") -> None:
        self.repo = repo
        self.mode = mode
        self.cluster = cluster
        self.cache = MetricsCache()
        self.engine: Engine | None = None
        self.saved = 0

    def attach(self, engine: Engine) -> None:
        """The engine to read at each call (it takes this recorder as its hook first)."""
        self.engine = engine

    def __call__(self, t: float) -> None:
        snap = self.snapshot()
        self.repo.save_snapshot(snap, compute(snap, cache=self.cache), self.mode(t))
        self.saved += 1

    def view(self) -> DefragView:
        e = self.engine
        if e is None:
            raise RuntimeError("attach() the engine before running it")
        return DefragView(
            now=e.now,
            state=e.state,
            running=dict(e.running),
            pending=[(jid, e.jobs[jid]) for _, _, jid in e.pending],
            max_requeues=requeue_limit(len(e.running), e.cfg.requeue_share),
            held=frozenset(e.holds),
            planned={j: t for j, t in e.planned.items() if j not in e.running},
        )

    def snapshot(self) -> ClusterSnapshot:
        view = self.view()
        sim = to_snapshot(view, ViewOptions(max_targets=len(view.pending)))
        specs = {jid: r.job for jid, r in view.running.items()} | dict(view.pending)
        jobs = []
        for job in sim.snapshot.jobs:
            spec = specs.get(int(job.id)) if job.id.isdigit() else None
            if spec is not None:
                job = job.model_copy(update={"user": spec.user, "account": spec.account})
            jobs.append(job)
        return sim.snapshot.model_copy(update={"cluster": self.cluster, "jobs": tuple(jobs)})

    def step(self, inner: DefragStep) -> DefragStep:
        """``inner``, its plans recorded; in dry-run the engine gets an empty plan."""
        return _RecordedStep(inner, self)


class _RecordedStep:
    def __init__(self, inner: DefragStep, recorder: HistoryRecorder) -> None:
        self.inner = inner
        self.recorder = recorder
        self.name = inner.name

    def plan(self, view: DefragView) -> DefragPlan:
        plan = self.inner.plan(view)
        if not (plan.requeue or plan.place or plan.hold):
            return plan
        mode = self.recorder.mode(view.now)
        # What the engine will do: the victims still running, cut to the requeue limit.
        victims = [v for v in plan.requeue if v in view.running][: view.max_requeues]
        when = at(view.now)
        steps = []
        for jid in victims:
            r = view.running[jid]
            since = r.last_checkpoint(view.now) or r.start
            gpus = r.job.num_gpu * r.job.gpu_milli / 1000
            lost = gpus * max(0.0, view.now - since) / 3600
            args = {"user": r.job.user, "lost_gpu_hours": round(lost, 4), "for_users": ""}
            steps.append((NewStep("requeue", str(jid), args), "done", when))
        steps += [(NewStep("start", str(j), {}), "done", when) for j in plan.place]
        steps += [(NewStep("reserve", str(j), {}), "done", when) for j in plan.hold]
        self.recorder.repo.plans.record_past(
            self.recorder.cluster, mode, "done", created_at=when,
            closed_at=when + timedelta(seconds=1), steps=steps,
            inputs={"kind": "simulator", "step": self.name},
        )  # fmt: skip
        return DefragPlan() if mode == "dry-run" else plan
