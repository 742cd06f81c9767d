"""Live: the web page of ``slurm-defrag serve --mode dry-run`` against the compose cluster,
loaded in Debian's headless chromium.

1. The service (web on, dry-run, cli backend through ``docker exec``) stores its first
   snapshot; the page shows every node of the cluster and every one of its GPUs.
2. Real jobs fragment node01/node02 as in the course scenario (F1: 5 GPUs and V: 1 GPU on
   node01, F2: 6 GPUs on node02); T asks for 3 a100 GPUs and waits although 4 are free.
   The service makes a dry-run plan for T; the page shows it with its steps and commands.
3. A screenshot goes to the test's output directory and to ``docs/img/web.png``.

Dry-run changes nothing in Slurm; only the jobs made here (named ``web-e2e-*``) are
cancelled. Other people's jobs on node03/node04 do not matter (T needs a100: node01/02).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from headless_browser import CHROMIUM, WHAT, Dom, dump_dom, screenshot
from live_cluster import (
    CTLD,
    DOCKER,
    GRES_CONF,
    ROOT,
    cluster_is_up,
    ctld,
    exclusive_cluster,
    job_states,
    sbatch,
    slurm_defrag,
)

from infra import require

pytestmark = pytest.mark.slurm

PREFIX = "web-e2e-"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(what: str, probe: Callable[[], Any], timeout_s: float, every: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")


def _api(base: str, path: str) -> Any:
    try:
        with urllib.request.urlopen(base + path, timeout=10) as r:
            return json.loads(r.read())
    except (urllib.error.URLError, ConnectionError):
        return None


def _cluster_gpus() -> dict[str, int]:
    """node -> GPU count, as slurmctld sees the cluster (``sinfo``'s GRES column)."""
    out = ctld("sinfo", "-h", "-N", "-o", "%N %G")
    gpus: dict[str, int] = {}
    for line in set(out.splitlines()):
        node, gres = line.split()
        # gpu:a100:8 or gpu:a100:8(S:0-1)
        gpus[node] = sum(int(g.split("(")[0].split(":")[-1]) for g in gres.split(",")
                         if g.startswith("gpu"))  # fmt: skip
    return gpus


def _idle(nodes: tuple[str, ...]) -> bool:
    out = ctld("sinfo", "-h", "-N", "-n", ",".join(nodes), "-o", "%N %t")
    return all(line.split()[1] == "idle" for line in set(out.splitlines()) if line.strip())


@pytest.fixture
def service(tmp_path: Path) -> Iterator[str]:
    """``slurm-defrag serve --mode dry-run`` with the web page on; yields its base URL."""
    require(cluster_is_up(), "the compose Slurm cluster (scripts/cluster.sh up)")
    require(CHROMIUM is not None, WHAT)
    db_url = f"sqlite:///{tmp_path / 'defrag.db'}"
    assert slurm_defrag("db", "upgrade", "--db", db_url).returncode == 0
    policy = tmp_path / "policy.toml"
    # The jobs here ran for seconds: the default 10-minute minimum runtime would protect V.
    policy.write_text("version = 1\n[protections]\nmin_runtime_minutes = 0\n")
    port = _free_port()
    settings = {
        "interval_s": 3, "lease_ttl_s": 8, "db_url": db_url, "policy": str(policy),
        "kill_switch_file": str(tmp_path / "STOP"), "http_port": port, "web": True,
    }  # fmt: skip
    config = tmp_path / "service.toml"
    config.write_text(
        "".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items())
        + f"[slurm]\ncommand_prefix = {json.dumps([DOCKER, 'exec', CTLD])}\n"
        + f"gres_conf = {json.dumps(str(GRES_CONF))}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_DEFRAG_")}
    log = tmp_path / "serve.log"
    cli = str(Path(sys.executable).parent / "slurm-defrag")
    proc = subprocess.Popen(
        [cli, "serve", "--config", str(config), "--mode", "dry-run"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )
    base = f"http://127.0.0.1:{port}/"
    try:
        _wait_for("the first snapshot on the page", lambda: _api(base, "api/snapshot"), 90)
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        assert code == 0, log.read_text()[-3000:]


def _cancel_ours(jobs: dict[str, str]) -> None:
    out = ctld("squeue", "-h", "-o", "%i %j")
    ours = [i for i, name in (ln.split(maxsplit=1) for ln in out.splitlines() if ln.strip())
            if i in jobs.values() and name.startswith(PREFIX)]  # fmt: skip
    if ours:
        ctld("scancel", *ours, check=False)


def _fragment(jobs: dict[str, str]) -> None:
    # One by one, each running before the next, so cons_tres hands out GPU indices in order.
    for role, node, gpus in (("F1", "node01", 5), ("V", "node01", 1), ("F2", "node02", 6)):
        jobs[role] = sbatch(
            "-w", node, f"--gres=gpu:a100:{gpus}", "-t", "10", "-J", PREFIX + role, wrap="sleep 600"
        )
        _wait_for(f"{role} running", lambda j=jobs[role]: job_states([j]).get(j) == "RUNNING", 60)
    jobs["T"] = sbatch("--gres=gpu:a100:3", "-t", "10", "-J", PREFIX + "T", wrap="sleep 60")


def test_page_shows_the_cluster_and_the_plan(service: str, tmp_path: Path) -> None:
    base = service
    cluster = _cluster_gpus()
    assert sum(cluster.values()) == 32  # the compose cluster: 4 nodes x 8 GPUs

    dom = Dom.parse(dump_dom(base))
    assert set(dom.node_rows()) >= set(cluster)
    assert dom.gpus() >= {(n, g) for n, count in cluster.items() for g in range(count)}

    jobs: dict[str, str] = {}
    with exclusive_cluster():
        try:
            _wait_for("node01 and node02 idle", lambda: _idle(("node01", "node02")), 300, 5)
            _fragment(jobs)
            t_id, v_id = jobs["T"], jobs["V"]

            def plan_for_t() -> Any:
                body = _api(base, "api/plans") or {"plans": []}
                return [
                    p
                    for p in body["plans"]
                    if t_id in [t["job_id"] for t in p["targets"] if t["served"]]
                ]

            plan = _wait_for("a dry-run plan serving T", plan_for_t, 90)[0]
            assert job_states([t_id]).get(t_id) == "PENDING"  # dry-run: nothing changed
            assert plan["mode"] == "dry-run"
            assert [v["job_id"] for v in plan["victims"]] == [v_id]

            dom = Dom.parse(dump_dom(base))
            shown = {e["plan"]: e for e in dom.with_attr("plan")}
            assert str(plan["id"]) in shown, sorted(shown)
            assert shown[str(plan["id"])]["targets"] == t_id
            assert shown[str(plan["id"])]["victims"] == v_id
            steps = [e["state"] for e in dom.with_attr("step")]
            assert steps, "the plan's steps are not on the page"
            held = {(e["node"], int(e["gpu"])) for e in dom.elements
                    if e.get("job") == jobs["F1"] and "gpu" in e}  # fmt: skip
            assert held == {("node01", g) for g in range(5)}

            shot = screenshot(base, tmp_path / "web.png")
            (ROOT / "docs" / "img").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(shot, ROOT / "docs" / "img" / "web.png")
        finally:
            _cancel_ours(jobs)
    # Dry-run: the plan's reservation was never made (others' may exist: not looked at).
    assert f"ReservationName={plan['reservation']} " not in ctld(
        "scontrol", "show", "reservation", check=False
    )
