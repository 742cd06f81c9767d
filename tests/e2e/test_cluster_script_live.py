"""Live: scripts/cluster.sh keeps the compose service's mode across restarts (issue #19).

After a crash, `scripts/cluster.sh defrag up` without DEFRAG_MODE used to bring the
service back in dry-run, leaving an enforce plan frozen until its TTL. The mode (and
interval) given last are remembered per cluster; a restart without them takes them.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator

import pytest
from live_cluster import DOCKER, PROJECT, ROOT, cluster_is_up, container, exclusive_cluster
from service_container import image_ready

from infra import require

pytestmark = pytest.mark.slurm

SERVICE = container("defrag")
SCRIPT = str(ROOT / "scripts" / "cluster.sh")


def _cluster_sh(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("DEFRAG_MODE", "DEFRAG_INTERVAL_S")}
    full.update(env)
    return subprocess.run(
        ["bash", SCRIPT, *args], capture_output=True, text=True, timeout=300, env=full, check=False
    )


def _service_env() -> dict[str, str]:
    out = subprocess.run(
        [DOCKER, "inspect", "--format", "{{json .Config.Env}}", SERVICE],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    env: dict[str, str] = {}
    for entry in json.loads(out):
        key, _, value = entry.partition("=")
        env[key] = value
    return env


@pytest.fixture
def compose_service() -> Iterator[None]:
    require(cluster_is_up(), "the compose Slurm cluster (scripts/cluster.sh up)")
    require(image_ready(), "the service image (scripts/cluster.sh build)")
    state = ROOT / ".cluster" / f"{PROJECT}.env"
    with exclusive_cluster():
        saved = state.read_text() if state.exists() else None
        try:
            yield
        finally:
            subprocess.run([DOCKER, "rm", "-f", SERVICE], capture_output=True, timeout=60)
            if saved is None:
                state.unlink(missing_ok=True)
            else:
                state.write_text(saved)


def test_defrag_up_keeps_the_mode_after_a_crash(compose_service: None) -> None:
    first = _cluster_sh("defrag", "up", DEFRAG_MODE="enforce", DEFRAG_INTERVAL_S="45")
    assert first.returncode == 0, first.stderr
    env = _service_env()
    assert (env["SLURM_DEFRAG_MODE"], env["SLURM_DEFRAG_INTERVAL_S"]) == ("enforce", "45")

    # the crash: the container dies; the admin restarts it without repeating the mode
    subprocess.run([DOCKER, "kill", "-s", "KILL", SERVICE], capture_output=True, timeout=60)
    again = _cluster_sh("defrag", "up")
    assert again.returncode == 0, again.stderr
    assert "mode enforce" in again.stderr
    env = _service_env()
    assert (env["SLURM_DEFRAG_MODE"], env["SLURM_DEFRAG_INTERVAL_S"]) == ("enforce", "45")

    # a mode given again wins, and is what is remembered next
    back = _cluster_sh("defrag", "up", DEFRAG_MODE="dry-run")
    assert back.returncode == 0, back.stderr
    assert _service_env()["SLURM_DEFRAG_MODE"] == "dry-run"
    assert _service_env()["SLURM_DEFRAG_INTERVAL_S"] == "45"


def test_a_bad_mode_is_refused_in_one_line(compose_service: None) -> None:
    bad = _cluster_sh("defrag", "up", DEFRAG_MODE="enforce; rm -rf /")
    assert bad.returncode != 0
    assert "DEFRAG_MODE=enforce; rm -rf /: use dry-run or enforce" in bad.stderr
