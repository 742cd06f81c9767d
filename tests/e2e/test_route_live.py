"""Live: the service's per-job route (packing_lever = fgd-route-score) end to end.

The service runs in its container in enforce mode with the route lever; job_submit.lua is
installed in slurmctld with a table naming the route file, on a volume both containers
share (docker-compose.yml ``defrag-route``). What it proves on each release:

* the service sets every node's own feature (``defrag_at_<node>``) and writes the route
  file every cycle, with the workload mix counted from the jobs it saw;
* slurmctld's job_submit.lua reads that file and names, for a one-node job, the node FGD
  picks; Slurm puts the job there although cons_tres's own order says otherwise;
* the arrival sequence of issue #14, item 5, with that lever: plain Slurm puts S on node01
  and the 8-GPU job T waits (``test_levers_live``); here S goes beside R and T starts at
  once, nothing requeued, R, S and T COMPLETED;
* a clean stop removes the route file and gives the nodes their own features back.

Sequence on the two a100 nodes (equal Weight, cons_tres takes node01 first):

0. W, an 8-GPU job, runs on node01 until the service has written a route (so it saw W:
   8-GPU requests are in its mix; on a site, the big jobs of the last day), then is
   cancelled;
1. R, a long 2-GPU job, runs on node02;
2. S, a 1-GPU job with no node named: on node01 it would leave 7 GPUs no 8-GPU job can
   use, on node02 it breaks nothing more; FGD names node02;
3. T, an 8-GPU job, starts on node01.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hook_install import hooks_installed
from live_cluster import ctld, exclusive_cluster, job_states
from test_levers_live import _running_on, _submit, all_completed_without_restart
from test_service_live import (
    FAST,
    Scenario,
    _container_scenario,
    _require_idle,
    _service,
    _show,
    _wait,
)
from test_service_live import _cleanup as cleanup_scenario

from plugins.plugins_support import ETC, Cluster, own_features, set_node_features

pytestmark = pytest.mark.slurm

ROUTE_DIR = "/var/lib/slurm-defrag/route"
ROUTE_FILE = f"{ROUTE_DIR}/defrag_route.lua"
NODES = ("node01", "node02", "node03", "node04")


def _features(node: str) -> list[str]:
    out = ctld("scontrol", "show", "node", node)
    for tok in out.split():
        if tok.startswith("AvailableFeatures="):
            value = tok.partition("=")[2]
            return [] if value in ("", "(null)") else value.split(",")
    return []


def _route_file_present(c: Cluster) -> bool:
    return c.run("test", "-s", ROUTE_FILE, check=False).returncode == 0


def _route_mtime(c: Cluster) -> float:
    """The route file's modification time, in seconds (0 if absent)."""
    out = c.run("stat", "-c", "%.9Y", ROUTE_FILE, check=False).stdout.strip()
    return float(out) if out else 0.0


@pytest.fixture
def routed(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Iterator[Any]:
    """The hooks installed, their table naming the route file; features put back after."""
    with exclusive_cluster(), hooks_installed(tmp_path_factory) as installed:
        c: Cluster = installed.cluster
        original = tmp_path / "defrag_nodes.lua"
        c.cp_out(f"{ETC}/defrag_nodes.lua", original)
        text = original.read_text(encoding="utf-8").rstrip()
        assert text.endswith("}"), "the rendered table does not end its return table"
        table = tmp_path / "routed.lua"
        table.write_text(text[:-1] + f'  route_file = "{ROUTE_FILE}",\n}}\n', encoding="utf-8")
        own = {n: own_features(",".join(_features(n))) for n in NODES}
        try:
            c.cp_in(table, f"{ETC}/defrag_nodes.lua")
            time.sleep(1.1)  # mtime in whole seconds on some file systems
            c.run("touch", f"{ETC}/job_submit.lua")
            yield c
        finally:
            c.cleanup_jobs()
            c.run("rm", "-f", ROUTE_FILE, check=False)
            for n in NODES:
                if _features(n) != own[n]:
                    set_node_features(c, n, own[n])
            c.cp_in(original, f"{ETC}/defrag_nodes.lua")


@pytest.fixture
def scenario(routed: Cluster, tmp_path: Path) -> Iterator[Scenario]:
    _require_idle()
    sc = _container_scenario(tmp_path)
    try:
        yield sc
    finally:
        cleanup_scenario(sc)


def test_the_route_lever_keeps_node01_whole_for_the_8_gpu_job(
    routed: Cluster, scenario: Scenario
) -> None:
    sc, c = scenario, routed
    # W runs until the service has seen it (its route file is there): on a loaded machine
    # the container took longer to start than a short W ran, and a service that never saw
    # a job has no mix and writes no route
    w = _submit(sc, "W", 8, 600, "-w", "node01")
    assert _running_on(w) == "node01"
    service = _service(
        sc,
        "route",
        user="root",  # node features need Slurm Admin rights (docker/README.md "Privileges")
        mode="enforce",
        **FAST,
        packing=True,
        packing_lever="fgd-route-score",
        route_file=ROUTE_FILE,
    )
    # the service container's start and first cycles: slow only on a loaded machine
    try:
        _wait("the route file", lambda: _route_file_present(c), 180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the service's log:\n{service.logs()[-4000:]}") from None
    for n in NODES:
        assert f"defrag_at_{n}" in _features(n), service.logs()
    _running_on(_submit(sc, "R", 2, 60, "-w", "node02"))
    ctld("scancel", w)
    _wait("W ended", lambda: not job_states([w]), 60)
    # A route the service wrote from a read made after both: the file is rewritten every
    # cycle, and the second rewrite from now began reading after now (a loaded machine
    # stretches a cycle well past its interval, so a fixed sleep did not always suffice).
    for _ in range(2):
        before = _route_mtime(c)
        _wait("the route file rewritten", lambda b=before: _route_mtime(c) > b, 120)
    s = _submit(sc, "S", 1, 30, "-H")  # held: a running job no longer shows Prefer=
    assert _show(s).get("Prefer") == "defrag_at_node02", service.logs()
    ctld("scontrol", "release", s)
    assert _running_on(s) == "node02", service.logs()
    t = _submit(sc, "T", 8, 20)
    assert _running_on(t, 30) == "node01", service.logs()

    all_completed_without_restart(sc, ("R", "S", "T"))
    code = service.stop()
    log = service.logs()
    assert code == 0, log
    assert not _route_file_present(c), log
    for n in NODES:
        assert not any(f.startswith("defrag_at_") for f in _features(n)), log
