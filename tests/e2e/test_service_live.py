"""Live: ``slurm-defrag serve`` against the compose Slurm cluster (scripts/cluster.sh up).

The course scenario with real jobs, all as root, all short sleeps:

* node01: F1 holds GPUs 0-4, V holds GPU 5, GPUs 6-7 are free;
* node02: F2 holds GPUs 0-5, GPUs 6-7 are free;
* T asks for 3 a100 GPUs (an NVLink block on these NVSwitch nodes): 4 a100 GPUs are free,
  no node has 3, so T waits. The planner's minimal plan requeues V (1 GPU) on node01.

Then, in order: ``serve --once --mode dry-run`` changes nothing in Slurm and stores the
plan; the service in enforce mode is started with ``test_crash_after = "requeue"`` and dies
(exit 137) right after the requeue; a restarted instance plus a second instance on the same
database finish the plan (only one acts); T runs on exactly GPUs 5-7 of node01, the
reservation is gone, V is requeued and every job ends COMPLETED. SIGTERM stops the service
cleanly. Everything made here is cleaned up (jobs cancelled, ``defrag-*`` reservations of
our plans deleted).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from live_cluster import CTLD, DOCKER, GRES_CONF, cluster_is_up, ctld, job_states, sbatch

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
        return [(p.id, p.mode, p.status, p.note, Plan.model_validate(p.inputs["plan"]))
                for p in Plans(store.engine).recent() if "plan" in p.inputs]
    finally:
        store.close()


def _cleanup(sc: Scenario) -> None:
    # Only our jobs: if the cluster was recreated meanwhile, the ids may be someone else's.
    ours = [j for j in sc.ids() if _show(j).get("JobName", "").startswith("svc-e2e-")]
    if ours:
        ctld("scancel", *ours, check=False)
    if sc.db_url:
        try:
            for _, _, _, _, plan in _plans(sc):
                ctld("scontrol", "delete", f"ReservationName={plan.reservation}", check=False)
        except Exception:  # the database may not exist if setup failed early
            pass


def _write_config(sc: Scenario, policy_extra: str = "", **extra: object) -> Path:
    policy = sc.workdir / f"policy-{len(list(sc.workdir.glob('policy*.toml')))}.toml"
    # Victims here ran for seconds: the default 10-minute minimum runtime would protect them.
    policy.write_text("version = 1\n[protections]\nmin_runtime_minutes = 0\n" + policy_extra)
    top: dict[str, object] = {
        "mode": "enforce", "interval_s": 4, "plan_ttl_s": 240, "lease_ttl_s": 8,
        "policy": str(policy), "db_url": sc.db_url,
        "kill_switch_file": str(sc.workdir / "STOP"), "http_port": sc.port, **extra,
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
    subprocess.run([*SERVE[:-1], "db", "upgrade", "--db", sc.db_url], check=True,
                   capture_output=True, env=_env())
    return sc


def _require_idle() -> None:
    require(cluster_is_up(), "the compose Slurm cluster (scripts/cluster.sh up)")
    states = ctld("sinfo", "-h", "-N", "-n", "node01,node02", "-o", "%N %t")
    busy = [ln for ln in set(states.splitlines()) if ln.split()[1] != "idle"]
    require(not busy, f"idle node01 and node02 (now: {sorted(busy)})")


def _fragment(sc: Scenario, *, check_pending: bool = True) -> None:
    # Submitted one by one so that cons_tres hands out GPU indices in this order.
    for role, node, gpus, secs in (("F1", "node01", 5, 150), ("V", "node01", 1, 60),
                                   ("F2", "node02", 6, 150)):
        sc.jobs[role] = sbatch("-w", node, f"--gres=gpu:a100:{gpus}", "-t", "5",
                               "-J", f"svc-e2e-{role}", wrap=f"sleep {secs}")
        _wait(f"{role} running", lambda j=sc.jobs[role]: job_states([j]).get(j) == "RUNNING",
              60)
    sc.jobs["T"] = sbatch("--gres=gpu:a100:3", "-t", "5", "-J", "svc-e2e-T", wrap="sleep 30")
    sc.t_submitted = time.monotonic()
    if check_pending:  # (with the service already running, T may be started by now)
        time.sleep(5)
        assert job_states([sc.jobs["T"]])[sc.jobs["T"]] == "PENDING"


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    """The fragmented cluster, shared by the dry-run and the crash tests (in that order)."""
    _require_idle()
    sc = _new_scenario(tmp_path_factory.mktemp("service"))
    try:
        _fragment(sc)
        yield sc
    finally:
        _cleanup(sc)


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Scenario]:
    """A scenario of its own (a fresh database), fragmented by the test when it wants."""
    require(cluster_is_up(), "the compose Slurm cluster (scripts/cluster.sh up)")
    sc = _new_scenario(tmp_path)
    try:
        yield sc
    finally:
        _cleanup(sc)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_DEFRAG_")}
    return {**env, **extra}


def test_dry_run_changes_nothing_and_stores_the_plan(scenario: Scenario) -> None:
    before = _state()
    proc = subprocess.run([*SERVE, "--config", str(scenario.config), "--mode", "dry-run",
                           "--once"], capture_output=True, text=True, timeout=180,
                          env=_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("planned"), proc.stdout + proc.stderr
    assert _state() == before
    ((_, mode, status, note, plan),) = _plans(scenario)
    assert (mode, status) == ("dry-run", "done")
    assert "nothing changed in Slurm" in note
    assert [v.job_id for v in plan.victims] == [scenario.jobs["V"]]
    (target,) = plan.served
    assert target.job_id == scenario.jobs["T"]
    assert [(p.node, p.gpus) for p in target.placements] == [("node01", (5, 6, 7))]


def _start(sc: Scenario, log: Path, config: Path | None = None,
           **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([*SERVE, "--config", str(config or sc.config)], env=_env(**env),
                            stdout=subprocess.DEVNULL, stderr=log.open("wb"))


def _stop(*procs: subprocess.Popen[bytes]) -> list[int]:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    return [p.wait(timeout=60) for p in procs]


def test_enforce_frees_the_block_survives_a_crash_and_one_instance_acts(
    scenario: Scenario,
) -> None:
    sc = scenario
    t_id, v_id = sc.jobs["T"], sc.jobs["V"]
    crashing = _start(sc, sc.workdir / "crash.log", SLURM_DEFRAG_TEST_CRASH_AFTER="requeue")
    try:
        assert crashing.wait(timeout=120) == 137, (sc.workdir / "crash.log").read_text()
    finally:
        if crashing.poll() is None:
            crashing.kill()
    enforce = [p for p in _plans(sc) if p[1] == "enforce"]
    ((pid, _, status, _, plan),) = enforce
    assert status == "applying"  # killed mid-plan: reservation held, V requeued
    assert plan.reservation in ctld("scontrol", "show", "reservation")

    a = _start(sc, sc.workdir / "a.log")
    b = _start(sc, sc.workdir / "b.log", SLURM_DEFRAG_HTTP_PORT=str(_free_port()))
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
        logs = [(sc.workdir / n).read_text() for n in ("a.log", "b.log")]
        assert any("read-only" in text for text in logs), logs
        with urllib.request.urlopen(f"http://127.0.0.1:{sc.port}/healthz", timeout=5) as r:
            health = json.loads(r.read())
        assert health["mode"] == "enforce"
        req = urllib.request.Request(f"http://127.0.0.1:{sc.port}/trigger", method="POST")
        with urllib.request.urlopen(req, timeout=5) as r:
            assert r.status == 202
    finally:
        for p in (a, b):
            p.send_signal(signal.SIGTERM)
        codes = [p.wait(timeout=60) for p in (a, b)]
    assert codes == [0, 0]
    assert _show(v_id).get("Restarts") == "1"
    # Every job runs to completion, the requeued victim included (it reruns after T).
    _wait("all jobs COMPLETED",
          lambda: all(_show(j).get("JobState") == "COMPLETED" for j in sc.ids()), 420, 5)
    (sc.workdir / "timing.json").write_text(json.dumps({"blocked_to_running_s":
                                                        round(blocked_to_running, 1)}))
    # Both instances ran the whole time; exactly one acted, the other stayed read-only.
    actors = [text for text in logs if ": step " in text]
    assert len(actors) == 1, logs
    (idle,) = [text for text in logs if text not in actors]
    assert "read-only" in idle
    print(f"\nservice live: T blocked -> running in {blocked_to_running:.1f} s "
          f"(includes the crash, the 8 s lease expiry and the restart)")


def test_time_from_blocked_to_running(fresh: Scenario) -> None:
    """The benchmark (docs/benchmarks.md "Service"): no crash, the service already running."""
    _require_idle()
    sc = fresh
    service = _start(sc, sc.workdir / "svc.log")
    try:
        _fragment(sc, check_pending=False)
        t_id = sc.jobs["T"]
        seen: dict[str, str] = {}

        def t_running() -> bool:
            # Keep the text seen while T runs: T is short and may have ended (and lost its
            # GRES detail lines) by the time the service is stopped below.
            job = _show(t_id)
            if job.get("JobState") != "RUNNING":
                return False
            seen["running"] = job["_text"]
            return True

        _wait("T running", t_running, 120, 0.5)
        blocked_to_running = time.monotonic() - sc.t_submitted
        _wait("plan done", lambda: [p[2] for p in _plans(sc)] == ["done"], 60)
    finally:
        assert _stop(service) == [0]
    assert "IDX:5-7" in seen["running"], seen["running"]
    store = Store.open(sc.db_url)
    try:
        plans = Plans(store.engine)
        (rec,) = plans.recent()
        steps = {s.action: s for s in plans.steps(rec.id)}
        span = {k: round((s.finished_at - rec.created_at).total_seconds(), 1)  # type: ignore[operator]
                for k, s in steps.items()}
        solve_s = rec.solve_time_s
    finally:
        store.close()
    _wait("all jobs COMPLETED",
          lambda: all(_show(j).get("JobState") == "COMPLETED" for j in sc.ids()), 420, 5)
    result = {"blocked_to_running_s": round(blocked_to_running, 1), "solve_s": solve_s,
              "steps_done_after_admission_s": span}
    print(f"\nservice live timing: {json.dumps(result)}")


def _weights() -> dict[str, int]:
    out = ctld("sinfo", "-h", "-N", "-o", "%N %w")
    return {n: int(w) for n, w in (ln.split() for ln in set(out.splitlines()) if ln.strip())}


def test_packing_weights_applied_and_restored_on_sigterm(fresh: Scenario) -> None:
    sc = fresh
    before = _weights()
    # Enforce mode for packing, but a policy that can neither requeue nor drain: other
    # people's jobs on the shared cluster are never touched by this test.
    config = _write_config(sc, "[limits]\nmax_victims_per_plan = 0\n[drain]\nenabled = false\n",
                           packing=True, packing_weight_bump=1000)
    service = _start(sc, sc.workdir / "pack.log", config)
    try:
        # Idle nodes (no GPU in use, not reserved or drained) get original + 1000.
        _wait("weights raised", lambda: any(w >= 1000 for w in _weights().values()), 60)
    finally:
        codes = _stop(service)
        after = _weights()
        for node, w in before.items():  # never leave the cluster changed, even on failure
            if after.get(node) != w:
                ctld("scontrol", "update", f"NodeName={node}", f"Weight={w}", check=False)
    assert codes == [0]
    assert after == before, (sc.workdir / "pack.log").read_text()
    assert "original weights of" in (sc.workdir / "pack.log").read_text()


def test_slurm_unreachable_no_action_one_line_per_cycle(fresh: Scenario) -> None:
    """slurmctld unreachable, as the service sees it: every Slurm command fails with the
    client's own message. Simulated at the command boundary (a wrapper in the command
    prefix) so the shared cluster keeps running for everyone else."""
    sc = fresh
    down = sc.workdir / "down"
    wrapper = sc.workdir / "slurm-or-down.sh"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ -e "{down}" ]; then\n'
        '  echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2\n'
        "  exit 1\nfi\n"
        f'exec {DOCKER} exec {CTLD} "$@"\n'
    )
    wrapper.chmod(0o755)
    sc.prefix = [str(wrapper)]
    config = _write_config(sc, mode="dry-run", interval_s=2)
    down.touch()
    log = sc.workdir / "down.log"
    service = _start(sc, log, config)
    try:
        time.sleep(9)
        lines = log.read_text().splitlines()
        cycles = [ln for ln in lines if "no action this cycle" in ln]
        assert len(cycles) >= 2, lines
        assert all("Unable to contact slurm controller" in ln for ln in cycles)
        # One line per cycle and nothing else from the cycle; no plan, no command stored.
        assert [ln for ln in lines if "slurm_defrag.service.loop" in ln] == cycles
        down.unlink()
        _wait("a normal cycle",
              lambda: "snapshot #" in log.read_text() or "dry-run plan" in log.read_text(), 60)
    finally:
        assert _stop(service) == [0]
