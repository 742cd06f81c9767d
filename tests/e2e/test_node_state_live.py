"""Live: a DOWN node, and slurmctld going away and coming back.

1. A node set DOWN (``scontrol update ... State=DOWN``) shows as DOWN, with its reason,
   in the snapshot of both backends, and as usable again after ``State=RESUME``. The node
   is one without jobs, first put in a reservation of this test so no other job can land
   on it (a DOWN node's jobs would be killed).
2. Last in this module: the slurmctld container is stopped. ``slurm-defrag snapshot``
   must then print exactly one line with "Slurm unavailable" and exit 4
   (SLURM_UNAVAILABLE), no traceback;
   once slurmctld is started again and every node that was up has re-registered, a
   snapshot works again. This disturbs anyone else using the cluster for ~10-30 s.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_cluster import (
    CTLD,
    DOCKER,
    GRES_CONF,
    REST_URL,
    cli_backend,
    cluster_is_up,
    container,
    ctld,
    node_states,
    responding,
    rest_backend,
    slurm_defrag,
    token,
    wait_nodes_responding,
)

from infra import require
from slurm_defrag.domain.cluster import NodeFlag
from slurm_defrag.errors import ExitCode

pytestmark = pytest.mark.slurm

TAG = uuid.uuid4().hex[:6]


@pytest.fixture(scope="module", autouse=True)
def cluster_up() -> None:
    require(cluster_is_up(), "the compose Slurm cluster")


@pytest.fixture
def quiet_node() -> Iterator[str]:
    """An idle node with no jobs, held in a reservation of this test while it is used."""
    resv = f"e2e-down-{TAG}"
    snap = cli_backend().snapshot()
    candidates = [n.name for n in snap.nodes if n.available and not n.gpus_used]
    node = ""
    for name in candidates:
        # Without IGNORE_JOBS Slurm refuses a reservation on a node that runs jobs.
        proc = subprocess.run(
            [
                DOCKER,
                "exec",
                CTLD,
                "scontrol",
                "create",
                "reservation",
                f"ReservationName={resv}",
                f"Nodes={name}",
                "StartTime=now",
                "Duration=30",
                "Users=root",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if proc.returncode == 0:
            node = name
            break
    if not node:
        pytest.fail(f"no idle node could be reserved among {candidates}: {node_states()}")
    try:
        yield node
    finally:
        ctld("scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
        ctld("scontrol", "delete", f"ReservationName={resv}", check=False)


def test_down_node_shows_as_down_in_both_snapshots(quiet_node: str) -> None:
    reason = f"e2e-down {TAG}"
    ctld("scontrol", "update", f"NodeName={quiet_node}", "State=DOWN", f"Reason={reason}")
    for snap in (cli_backend().snapshot(), rest_backend().snapshot()):
        node = snap.node_by_name[quiet_node]
        assert NodeFlag.DOWN in node.state, (snap.source, sorted(node.state))
        assert node.down, snap.source
        assert not node.schedulable, snap.source
        assert node.reason == reason, snap.source
    ctld("scontrol", "update", f"NodeName={quiet_node}", "State=RESUME")
    wait_nodes_responding([quiet_node], timeout_s=60)
    for snap in (cli_backend().snapshot(), rest_backend().snapshot()):
        node = snap.node_by_name[quiet_node]
        assert not node.down, (snap.source, sorted(node.state))
        assert node.schedulable, (snap.source, sorted(node.state))


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_slurmctld_outage_is_one_line_and_recovers(tmp_path: Path) -> None:
    """Last: stops slurmctld, checks the messages, starts it and waits for every node.

    Three ways to read while slurmctld is stopped; each must end in one line, non-zero:
      a) cli backend, commands run in the (stopped) slurmctld container: the documented
         test setup; must say "Slurm unavailable" (exit 4, SLURM_UNAVAILABLE);
      b) cli backend, commands run in the slurmrestd container (client, munge and
         slurm.conf there, like a login node): slurmctld unreachable over the network;
      c) rest backend: slurmrestd up, slurmctld not.
    b) and c) should also say "Slurm unavailable"; the adapters currently call them
    "rejected" (exit 5, SLURM_REJECTED) on some releases (docker/README.md "Known adapter
    gaps"). Such a
    result makes the test xfail once recovery has been checked; anything else fails.
    """
    were_up = sorted(n for n, s in node_states().items() if responding(s))
    assert were_up, node_states()
    token_file = tmp_path / "jwt"
    token_file.write_text(token(lifespan_s=900), encoding="utf-8")
    common = ("snapshot", "--gres-conf", str(GRES_CONF), "--timeout", "90")
    reads = {
        "a) cli in slurmctld": ("--backend", "cli", "--command-prefix", f"{DOCKER} exec {CTLD}"),
        "b) cli in slurmrestd": (
            "--backend",
            "cli",
            "--command-prefix",
            f"{DOCKER} exec {container('slurmrestd')}",
        ),
        "c) rest": ("--backend", "rest", "--rest-url", REST_URL, "--token-file", str(token_file)),
    }
    results: dict[str, tuple[int, str, str]] = {}
    subprocess.run([DOCKER, "stop", "-t", "30", CTLD], check=True, capture_output=True, timeout=90)
    try:
        for name, args in reads.items():
            proc = slurm_defrag(*common, *args)
            results[name] = (proc.returncode, one_error_line(proc), proc.stdout)
    finally:
        subprocess.run([DOCKER, "start", CTLD], check=True, capture_output=True, timeout=90)
        states = wait_nodes_responding(were_up, timeout_s=150)
    snap = cli_backend().snapshot()
    assert {n.name for n in snap.nodes if not n.down} >= set(were_up), states
    assert rest_backend().snapshot().node_by_name.keys() == snap.node_by_name.keys()

    known_gaps = []
    for name, (rc, line, stdout) in results.items():
        assert stdout == "", (name, stdout)
        assert rc != 0, (name, line)
        if rc == ExitCode.SLURM_UNAVAILABLE and "Slurm unavailable" in line:
            continue
        if not name.startswith("a)") and rc == ExitCode.SLURM_REJECTED and "Slurm rejected" in line:
            known_gaps.append(f"{name}: {line}")
            continue
        raise AssertionError(f"{name}: exit {rc}: {line}")
    if known_gaps:
        pytest.xfail("slurmctld down reported as 'rejected': " + " | ".join(known_gaps))
