"""A throwaway Slurm 24.11 cluster with ``TopologyPlugin=topology/block`` (issue #19).

One container of the compose Slurm image (``slurm-defrag/slurm:trixie``, built by
``SLURM_SUITE=trixie scripts/cluster.sh up``) runs slurmctld and four slurmd in
multiple-slurmd mode, with the configuration the recordings in
tests/fixtures/topology-block-24.11 were taken from (``config/``: blocks b1=node[01-02],
b2=node[03-04], BlockSizes=2,4, no slurmdbd). It shares nothing with the compose cluster
(own name, no network, no volumes), so it needs no cluster lock and is removed afterwards.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from live_cluster import DOCKER, PREFIX

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "tests" / "fixtures" / "topology-block-24.11"
CONFIG = RECORDINGS / "config"
IMAGE = "slurm-defrag/slurm:trixie"
NODES = ("node01", "node02", "node03", "node04")


def docker(*args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [DOCKER, *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc


def image_present() -> bool:
    try:
        return docker("image", "inspect", IMAGE, check=False).returncode == 0
    except OSError:
        return False


def _wait(what: str, ok: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.5)
    raise AssertionError(f"block cluster: {what} not within {timeout_s:g} s")


@contextmanager
def block_cluster() -> Iterator[str]:
    """Start the cluster; yield the container name (``docker exec NAME scontrol ...``)."""
    name = f"{PREFIX}-blockprobe-{uuid.uuid4().hex[:8]}"
    mounts = []
    for conf in ("slurm.conf", "topology.conf", "gres.conf"):
        mounts += ["-v", f"{CONFIG / conf}:/etc/slurm/{conf}:ro"]
    docker("run", "-d", "--name", name, "--hostname", "blockprobe", *mounts, IMAGE, "slurmctld")
    try:

        def up() -> bool:
            return "UP" in docker("exec", name, "scontrol", "ping", check=False).stdout

        _wait("slurmctld UP", up, 60)
        for node in NODES:
            docker("exec", name, "mkdir", "-p", f"/var/spool/slurmd/{node}")
            docker("exec", "-d", name, "/usr/sbin/slurmd", "-D", "-N", node)

        def idle() -> bool:
            out = docker("exec", name, "sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout
            states = dict(line.split() for line in out.splitlines() if line.strip())
            return all(states.get(n) == "idle" for n in NODES)

        _wait("all nodes idle", idle, 90)
        yield name
    finally:
        docker("rm", "-f", name, check=False)
