"""Live: the slurm-defrag service in its own container against the compose Slurm cluster.

The service runs as the compose ``defrag`` service does (docker/defrag/, beside slurmctld in
its network namespace, cli backend, the compose PostgreSQL, user ``defrag`` = Slurm
Operator), one container per instance, started by :mod:`service_container`. Each scenario
gets a scratch database.

The course scenario with real jobs, all as root, all short sleeps:

* node01: F1 holds GPUs 0-4, V holds GPU 5, GPUs 6-7 are free;
* node02: F2 holds GPUs 0-5, GPUs 6-7 are free;
* T asks for 3 a100 GPUs (an NVLink block on these NVSwitch nodes): 4 a100 GPUs are free,
  no node has 3, so T waits. The planner's minimal plan requeues V (1 GPU) on node01.

Then, in order: the service in dry-run mode changes nothing in Slurm and stores the plan;
the service in enforce mode is started with ``test_crash_after = "requeue"`` and dies
(exit 137) right after the requeue; a restarted instance plus a second container on the
same database finish the plan (only one acts: the lease); T runs on exactly GPUs 5-7 of
node01, the reservation is gone, V is requeued and every job ends COMPLETED. SIGTERM
(``docker stop``) stops the service cleanly. Everything made here is cleaned up (jobs
cancelled, ``defrag-*`` reservations of our plans deleted, containers and databases
removed).

The host-process helpers (``_new_scenario``, ``_write_config``, ``_start``, ``_stop``: the
service as a process on this host, Slurm through ``docker exec``) stay for local debugging
and for tests that import them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from live_cluster import (
    CTLD,
    DOCKER,
    GRES_CONF,
    PYSLURM_SUITES,
    SUITE,
    cluster_is_up,
    ctld,
    exclusive_cluster,
    job_states,
    node_weights,
    restore_weights,
    sbatch,
    wait_evaluated,
)
from service_container import (
    Database,
    ServiceContainer,
    free_port,
    image_ready,
    scratch_database,
)

from infra import require
from slurm_defrag.domain.plan import Plan
from slurm_defrag.store.database import Store
from slurm_defrag.store.plans import Plans

pytestmark = pytest.mark.slurm

SERVE = [str(Path(sys.executable).parent / "slurm-defrag"), "serve"]


@dataclass
class Scenario:
    jobs: dict[str, str] = field(default_factory=dict)
    """role (F1, V, F2, T) -> job id"""
    t_submitted: float = 0.0
    workdir: Path = Path()
    config: Path = Path()
    db_url: str = ""
    port: int = 0
    prefix: list[str] = field(default_factory=lambda: [DOCKER, "exec", CTLD])
    db: Database | None = None
    """the scratch database of a container scenario (``db_url`` is its host address)"""
    services: list[ServiceContainer] = field(default_factory=list)

    def ids(self) -> list[str]:
        return list(self.jobs.values())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _state() -> str:
    """Everything the service could change: jobs, reservations, node states, weights."""
    jobs = ctld("squeue", "-h", "-o", "%i %T %N %b %v")
    resv = ctld("scontrol", "show", "reservation")
    nodes = ctld("sinfo", "-h", "-N", "-o", "%N %T %E %w")
    return "\n".join([jobs, resv, "\n".join(sorted(set(nodes.splitlines())))])


def _show(job_id: str) -> dict[str, str]:
    out = ctld("scontrol", "show", "job", "-d", job_id, check=False)
    fields: dict[str, str] = {}
    for tok in out.split():
        k, sep, v = tok.partition("=")
        if sep and k not in fields:
            fields[k] = v
    fields["_text"] = out
    return fields


def _wait(what: str, cond: object, timeout_s: float, every: float = 1.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")


def _plans(sc: Scenario) -> list[tuple[int, str, str, str, Plan]]:
    store = Store.open(sc.db_url)
    try:
        return [
            (p.id, p.mode, p.status, p.note, Plan.model_validate(p.inputs["plan"]))
            for p in Plans(store.engine).recent()
            if "plan" in p.inputs
        ]
    finally:
        store.close()


def _cleanup(sc: Scenario) -> None:
    for svc in sc.services:
        svc.remove()
    # Only our jobs: if the cluster was recreated meanwhile, the ids may be someone else's.
    ours = [j for j in sc.ids() if _show(j).get("JobName", "").startswith("svc-e2e-")]
    if ours:
        ctld("scancel", *ours, check=False)
    if sc.db_url:
        try:
            plans = [plan for _, _, _, _, plan in _plans(sc)]
        except Exception:  # the database may not exist if setup failed early
            plans = []
        drained = ctld("sinfo", "-h", "-N", "-o", "%N|%E", check=False).splitlines()
        for plan in plans:
            ctld("scontrol", "delete", f"ReservationName={plan.reservation}", check=False)
            # a plan left open (the service stopped mid-plan) may hold a node drained:
            # the next test must find the cluster as this one did
            tag = f"slurm-defrag:{plan.plan_id}"
            for node in {ln.split("|")[0] for ln in drained if tag in ln}:
                ctld("scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
    if sc.db is not None:
        sc.db.drop()


def _write_config(sc: Scenario, policy_extra: str = "", **extra: object) -> Path:
    policy = sc.workdir / f"policy-{len(list(sc.workdir.glob('policy*.toml')))}.toml"
    # Victims here ran for seconds: the default 10-minute minimum runtime would protect them.
    policy.write_text("version = 1\n[protections]\nmin_runtime_minutes = 0\n" + policy_extra)
    top: dict[str, object] = {
        "mode": "enforce",
        "interval_s": 4,
        "plan_ttl_s": 240,
        "lease_ttl_s": 8,
        "policy": str(policy),
        "db_url": sc.db_url,
        "kill_switch_file": str(sc.workdir / "STOP"),
        "http_port": sc.port,
        **extra,
    }
    path = sc.workdir / f"service-{len(list(sc.workdir.glob('service-*.toml')))}.toml"
    path.write_text(
        "".join(f"{k} = {json.dumps(v)}\n" for k, v in top.items())
        + f"[slurm]\ncommand_prefix = {json.dumps(sc.prefix)}\n"
        + f"gres_conf = {json.dumps(str(GRES_CONF))}\n"
    )
    return path


def _new_scenario(workdir: Path) -> Scenario:
    sc = Scenario(workdir=workdir)
    sc.db_url = f"sqlite:///{sc.workdir / 'defrag.db'}"
    sc.port = _free_port()
    sc.config = _write_config(sc)
    subprocess.run(
        [*SERVE[:-1], "db", "upgrade", "--db", sc.db_url],
        check=True,
        capture_output=True,
        env=_env(),
    )
    return sc


def _require_idle(wait_s: float = 180) -> None:
    """node01 and node02 idle (foreign jobs may still be ending: wait for them a while)."""
    require(cluster_is_up(), "the compose Slurm cluster (scripts/cluster.sh up)")
    deadline = time.monotonic() + wait_s
    while True:
        states = ctld("sinfo", "-h", "-N", "-n", "node01,node02", "-o", "%N %t")
        busy = [ln for ln in set(states.splitlines()) if ln.split()[1] != "idle"]
        if not busy or time.monotonic() > deadline:
            break
        time.sleep(3)
    require(not busy, f"idle node01 and node02 (now: {sorted(busy)})")


def _container_scenario(workdir: Path) -> Scenario:
    """A scenario whose service runs in containers, on a scratch PostgreSQL database."""
    require(image_ready(), "the service image (scripts/cluster.sh build)")
    db = scratch_database()
    return Scenario(workdir=workdir, db=db, db_url=db.host_url)


# Fast settings for the scenario tests: a cycle every 4 s, a dead leader replaced after 8 s.
FAST: dict[str, object] = {"interval_s": 4, "lease_ttl_s": 8, "plan_ttl_s": 240}


def _service(sc: Scenario, tag: str, **settings: object) -> ServiceContainer:
    """Start a service container for ``sc`` (cleaned up with it)."""
    assert sc.db is not None
    svc = ServiceContainer.start(tag, sc.db, **settings)
    sc.services.append(svc)
    return svc


def _fragment(sc: Scenario, *, check_pending: bool = True) -> None:
    # Submitted one by one so that cons_tres hands out GPU indices in this order.
    for role, node, gpus, secs in (
        ("F1", "node01", 5, 150),
        ("V", "node01", 1, 60),
        ("F2", "node02", 6, 150),
    ):
        sc.jobs[role] = sbatch(
            "-w",
            node,
            f"--gres=gpu:a100:{gpus}",
            "-t",
            "5",
            "-J",
            f"svc-e2e-{role}",
            wrap=f"sleep {secs}",
        )
        _wait(f"{role} running", lambda j=sc.jobs[role]: job_states([j]).get(j) == "RUNNING", 60)
    sc.jobs["T"] = sbatch("--gres=gpu:a100:3", "-t", "5", "-J", "svc-e2e-T", wrap="sleep 30")
    sc.t_submitted = time.monotonic()
    if check_pending:  # (with the service already running, T may be started by now)
        wait_evaluated(sc.jobs["T"])
        assert job_states([sc.jobs["T"]])[sc.jobs["T"]] == "PENDING"


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    """The fragmented cluster, shared by the dry-run and the crash tests (in that order);
    the cluster is held (exclusive_cluster) from fragmenting to clean-up."""
    require(cluster_is_up(), "the compose Slurm cluster (scripts/cluster.sh up)")
    with exclusive_cluster():
        _require_idle()
        sc = _container_scenario(tmp_path_factory.mktemp("service"))
        try:
            _fragment(sc)
            yield sc
        finally:
            _cleanup(sc)


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Scenario]:
    """A container scenario of its own (a fresh database), fragmented by the test when it
    wants."""
    require(cluster_is_up(), "the compose Slurm cluster (scripts/cluster.sh up)")
    sc = _container_scenario(tmp_path)
    try:
        yield sc
    finally:
        _cleanup(sc)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_DEFRAG_")}
    return {**env, **extra}


def _start(
    sc: Scenario, log: Path, config: Path | None = None, **env: str
) -> subprocess.Popen[bytes]:
    """Host mode: ``slurm-defrag serve`` as a process on this host."""
    return subprocess.Popen(
        [*SERVE, "--config", str(config or sc.config)],
        env=_env(**env),
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )


def _stop(*procs: subprocess.Popen[bytes]) -> list[int]:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    return [p.wait(timeout=60) for p in procs]


def _mount_dir(path: Path) -> Path:
    """``path`` readable by the service user inside the container (pytest's are 0700)."""
    path.chmod(0o755)
    return path


def test_dry_run_changes_nothing_and_stores_the_plan(scenario: Scenario) -> None:
    before = _state()
    svc = _service(scenario, "dryrun", mode="dry-run", interval_s=300)
    _wait("the dry-run plan", lambda: len(_plans(scenario)) >= 1, 120)
    health = svc.health()
    assert health is not None
    assert health["mode"] == "dry-run"
    assert svc.stop() == 0, svc.logs()
    assert _state() == before
    ((_, mode, status, note, plan),) = _plans(scenario)
    assert (mode, status) == ("dry-run", "done")
    assert "nothing changed in Slurm" in note
    assert [v.job_id for v in plan.victims] == [scenario.jobs["V"]]
    (target,) = plan.served
    assert target.job_id == scenario.jobs["T"]
    assert [(p.node, p.gpus) for p in target.placements] == [("node01", (5, 6, 7))]
    assert "dry-run plan" in svc.logs()


@pytest.mark.newsuite  # the one enforce end-to-end of a new suite
def test_enforce_frees_the_block_survives_a_crash_and_one_instance_acts(
    scenario: Scenario,
) -> None:
    sc = scenario
    t_id, v_id = sc.jobs["T"], sc.jobs["V"]
    a = _service(sc, "a", mode="enforce", **FAST, test_crash_after="requeue")
    assert a.wait_exit(120) == 137, a.logs()
    enforce = [p for p in _plans(sc) if p[1] == "enforce"]
    ((pid, _, status, _, plan),) = enforce
    assert status == "applying"  # killed mid-plan: reservation held, V requeued
    assert plan.reservation in ctld("scontrol", "show", "reservation")

    # The crashed instance comes back as a new container (without the crash setting), and
    # a second instance on the same database beside it; the dead holder's lease must
    # expire (8 s) before either may act.
    a.restart(test_crash_after=None)
    b = _service(sc, "b", mode="enforce", **FAST, http_port=free_port())
    try:
        _wait("T running", lambda: _show(t_id).get("JobState") == "RUNNING", 150)
        blocked_to_running = time.monotonic() - sc.t_submitted
        job = _show(t_id)
        assert job["NodeList"] == "node01"
        assert "IDX:5-7" in job["_text"], job["_text"]  # exactly the planned GPUs
        _wait("plan done", lambda: [p[2] for p in _plans(sc) if p[0] == pid] == ["done"], 60)
        assert plan.reservation not in ctld("scontrol", "show", "reservation")
        # The job kept running after its reservation ended (ResvOverRun=0 would kill it).
        time.sleep(5)
        assert _show(t_id).get("JobState") == "RUNNING"
        health = a.health()
        assert health is not None
        assert health["mode"] == "enforce"
        assert a.trigger() == 202
    finally:
        codes = [a.stop(), b.stop()]
    logs = [a.logs(), b.logs()]
    assert codes == [0, 0], "\n---\n".join(text[-3000:] for text in logs)
    assert any("read-only" in text for text in logs), logs
    assert _show(v_id).get("Restarts") == "1"
    # Every job runs to completion, the requeued victim included (it reruns after T).
    _wait(
        "all jobs COMPLETED",
        lambda: all(_show(j).get("JobState") == "COMPLETED" for j in sc.ids()),
        420,
        5,
    )
    (sc.workdir / "timing.json").write_text(
        json.dumps({"blocked_to_running_s": round(blocked_to_running, 1)})
    )
    # Both instances ran the whole time; exactly one acted, the other stayed read-only.
    actors = [text for text in logs if ": step " in text]
    assert len(actors) == 1, logs
    (idle,) = [text for text in logs if text not in actors]
    assert "read-only" in idle
    print(
        f"\nservice live: T blocked -> running in {blocked_to_running:.1f} s "
        f"(includes the crash, the 8 s lease expiry and the restart)"
    )


def test_a_target_held_mid_plan_ends_the_plan_and_releases_the_block(fresh: Scenario) -> None:
    """#40: the target's owner holds it once the plan has its reservation (the service is
    stopped right there, ``test_crash_after = "reserve"``, so the hold lands in between).
    The restarted service requeues nobody for it, deletes the reservation at once (not at
    the TTL) and closes the plan ``aborted``, naming the hold."""
    sc = fresh
    with exclusive_cluster():
        _require_idle()
        _fragment(sc)
        t_id, v_id = sc.jobs["T"], sc.jobs["V"]
        svc = _service(sc, "held", mode="enforce", **FAST, test_crash_after="reserve")
        assert svc.wait_exit(120) == 137, svc.logs()
        ((pid, _, status, _, plan),) = [p for p in _plans(sc) if p[1] == "enforce"]
        assert status == "applying"
        assert plan.reservation in ctld("scontrol", "show", "reservation")
        ctld("scontrol", "hold", t_id)  # as its owner would (scontrol hold <own job>)
        svc.restart(test_crash_after=None)
        try:
            _wait(
                "the plan closed",
                lambda: [p[2] for p in _plans(sc) if p[0] == pid] == ["aborted"],
                120,
            )
        finally:
            code = svc.stop()
        log = svc.logs()
        assert code == 0, log
        ((_, _, _, note, _),) = [p for p in _plans(sc) if p[0] == pid]
        assert f"target job {t_id} is held (JobHeld" in note, note
        assert plan.reservation not in ctld("scontrol", "show", "reservation"), log
        v = _show(v_id)
        assert (v.get("JobState"), v.get("Restarts")) == ("RUNNING", "0"), v["_text"]
        assert "requeue job" not in log, log


@pytest.mark.newsuite  # on a suite whose image has pyslurm
def test_enforce_through_pyslurm_completes_the_plan(fresh: Scenario) -> None:
    """The whole plan read and written through the pyslurm backend: snapshot, reservation
    create/delete, requeue, the target's ReservationName (no squeue/scontrol in between)."""
    if SUITE not in PYSLURM_SUITES:
        pytest.skip(f"the service image of suite {SUITE} has no pyslurm")
    sc = fresh
    with exclusive_cluster():
        _require_idle()
        _fragment(sc)
        t_id, v_id = sc.jobs["T"], sc.jobs["V"]
        service = _service(sc, "pyslurm", mode="enforce", **FAST, slurm__backend="pyslurm")
        try:
            _wait("T running", lambda: _show(t_id).get("JobState") == "RUNNING", 150)
            job = _show(t_id)
            assert job["NodeList"] == "node01"
            assert "IDX:5-7" in job["_text"], job["_text"]  # exactly the planned GPUs
            _wait("plan done", lambda: [p[2] for p in _plans(sc)] == ["done"], 60)
            ((_, mode, _, _, plan),) = _plans(sc)
            assert mode == "enforce"
            assert [v.job_id for v in plan.victims] == [v_id]
            assert plan.reservation not in ctld("scontrol", "show", "reservation")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{service.logs()[-4000:]}") from None
        finally:
            code = service.stop()
        log = service.logs()
        assert code == 0, log[-3000:]
        assert "backend pyslurm" in log, log[-3000:]
        assert _show(v_id).get("Restarts") == "1"
        _wait(
            "all jobs COMPLETED",
            lambda: all(_show(j).get("JobState") == "COMPLETED" for j in sc.ids()),
            420,
            5,
        )


def test_time_from_blocked_to_running(fresh: Scenario) -> None:
    """The benchmark (docs/benchmarks.md "Service"): no crash, the service already running
    in its container with the settings of docker/defrag/service.toml — the default
    interval (60 s) and lease (30 s) — in enforce mode. No epilog is installed here, so
    only the interval drives the cycles."""
    sc = fresh
    with exclusive_cluster():
        _require_idle()
        service = _service(sc, "timing", mode="enforce")
        try:
            service.wait_healthy()
            # what the service says it uses ("serving: mode=enforce, every 60 s, ...")
            interval = re.search(r"serving: .*every ([0-9.]+) s", service.logs())
            assert interval is not None, service.logs()
            interval_s = float(interval[1])
            _fragment(sc, check_pending=False)
            t_id = sc.jobs["T"]
            seen: dict[str, str] = {}

            def t_running() -> bool:
                # Keep the text seen while T runs: T is short and may have ended (and lost
                # its GRES detail lines) by the time the service is stopped below.
                job = _show(t_id)
                if job.get("JobState") != "RUNNING":
                    return False
                seen["running"] = job["_text"]
                return True

            _wait("T running", t_running, 330)
            blocked_to_running = time.monotonic() - sc.t_submitted
            _wait("plan done", lambda: [p[2] for p in _plans(sc)] == ["done"], 200)
        finally:
            assert service.stop() == 0, service.logs()
        assert "IDX:5-7" in seen["running"], seen["running"]
        store = Store.open(sc.db_url)
        try:
            plans = Plans(store.engine)
            (rec,) = plans.recent()
            steps = {s.action: s for s in plans.steps(rec.id)}
            span = {
                k: round((s.finished_at - rec.created_at).total_seconds(), 1)  # type: ignore[operator]
                for k, s in steps.items()
            }
            solve_s = rec.solve_time_s
        finally:
            store.close()
        _wait(
            "all jobs COMPLETED",
            lambda: all(_show(j).get("JobState") == "COMPLETED" for j in sc.ids()),
            420,
            5,
        )
    result = {
        "interval_s": interval_s,
        "blocked_to_running_s": round(blocked_to_running, 1),
        "solve_s": solve_s,
        "steps_done_after_admission_s": span,
    }
    (sc.workdir / "timing.json").write_text(json.dumps(result))
    print(f"\nservice live timing (container): {json.dumps(result)}")


_weights = node_weights  # (also imported by test_service_faults_live)


def test_packing_weights_applied_and_restored_on_sigterm(fresh: Scenario) -> None:
    sc = fresh
    before = _weights()
    # Enforce mode for packing, but a policy that can neither requeue nor drain: other
    # people's jobs on the shared cluster are never touched by this test. Node weights
    # need Slurm Admin rights (docker/README.md "Privileges"): this instance runs as root.
    policy = _mount_dir(sc.workdir) / "policy.toml"
    policy.write_text("version = 1\n[limits]\nmax_victims_per_plan = 0\n[drain]\nenabled = false\n")
    service = _service(
        sc,
        "packing",
        user="root",
        mode="enforce",
        **FAST,
        packing=True,
        packing_weight_bump=1000,
        policy="/etc/slurm-defrag/test/policy.toml",
        files={"/etc/slurm-defrag/test": sc.workdir},
    )
    try:
        # Idle nodes (no GPU in use, not reserved or drained) get original + 1000.
        _wait("weights raised", lambda: any(w >= 1000 for w in _weights().values()), 90)
    finally:
        code = service.stop()
        after = restore_weights(before)
    log = service.logs()
    assert code == 0, log
    assert after == before, log
    assert "original weights of" in log


def test_slurm_unreachable_no_action_one_line_per_cycle(fresh: Scenario) -> None:
    """slurmctld unreachable, as the service sees it: every Slurm command fails with the
    client's own message. Simulated at the command boundary (a wrapper in the command
    prefix, inside the service container) so the shared cluster keeps running for
    everyone else."""
    sc = fresh
    mounted = "/etc/slurm-defrag/test"
    down = _mount_dir(sc.workdir) / "down"
    wrapper = sc.workdir / "slurm-or-down.sh"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ -e "{mounted}/down" ]; then\n'
        '  echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2\n'
        "  exit 1\nfi\n"
        'exec "$@"\n'
    )
    wrapper.chmod(0o755)
    down.touch()
    service = _service(
        sc,
        "unreachable",
        mode="dry-run",
        interval_s=2,
        slurm__command_prefix=[f"{mounted}/slurm-or-down.sh"],
        files={mounted: sc.workdir},
    )
    try:
        service.wait_healthy()
        _wait("two failed cycles", lambda: service.logs().count("no action this cycle") >= 2, 60)
        lines = service.logs().splitlines()
        cycles = [ln for ln in lines if "no action this cycle" in ln]
        assert len(cycles) >= 2, lines
        assert all("Unable to contact slurm controller" in ln for ln in cycles)
        # One line per cycle and nothing else from the cycle; no plan, no command stored.
        assert [ln for ln in lines if "slurm_defrag.service.loop" in ln] == cycles
        down.unlink()
        _wait(
            "a normal cycle",
            lambda: "snapshot #" in service.logs() or "dry-run plan" in service.logs(),
            60,
        )
    finally:
        assert service.stop() == 0
