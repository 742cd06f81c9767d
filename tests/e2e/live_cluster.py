"""Helpers for the live tests against the compose Slurm cluster (scripts/cluster.sh up).

Everything goes through ``docker exec`` into the fixed container names
``slurmdefrag-$SLURM_SUITE-<service>`` and, for the rest backend, slurmrestd on
``127.0.0.1:$SLURMRESTD_PORT`` with a JWT. Other people may use the cluster at the same
time: helpers never touch objects they did not create, except where a test says so.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from slurm_defrag.slurm.cli_backend import CliSlurm
from slurm_defrag.slurm.connection import SlurmSettings
from slurm_defrag.slurm.rest import RestSlurm

ROOT = Path(__file__).resolve().parents[2]
SUITE = os.environ.get("SLURM_SUITE", "bookworm")
PREFIX = os.environ.get("CLUSTER_PREFIX", "slurmdefrag")
"""Container prefix (scripts/cluster.sh): the test suite runs its own cluster under
``slurmdefrag-test`` (scripts/test.sh), so it never touches a cluster a user started."""
PROJECT = f"{PREFIX}-{SUITE}"
DOCKER = shutil.which("docker", path="/usr/bin:/usr/local/bin") or "/usr/bin/docker"
REST_URL = f"http://127.0.0.1:{os.environ.get('SLURMRESTD_PORT', '6820')}"
GRES_CONF = ROOT / "docker" / "slurm" / "gres.conf"
CLUSTER = "defrag"  # ClusterName in docker/slurm/slurm.conf
PYSLURM_SUITES = ("s2511",)
"""Suites whose service image carries pyslurm (built against that suite's Slurm)."""


def container(service: str) -> str:
    return f"{PROJECT}-{service}"


CTLD = container("slurmctld")


def dexec(
    service: str, *args: str, user: str | None = None, check: bool = True, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``args`` in a cluster container (as ``user`` if given, cwd /jobs)."""
    argv = [DOCKER, "exec", *(["-u", user] if user else []), container(service), *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} ({service}, user {user or 'root'}) failed "
            f"({proc.returncode}): {proc.stderr.strip()}"
        )
    return proc


def ctld(*args: str, user: str | None = None, check: bool = True) -> str:
    """stdout of a command in the slurmctld container."""
    return dexec("slurmctld", *args, user=user, check=check).stdout


def cluster_is_up() -> bool:
    if not (ROOT / "scripts" / "cluster.sh").exists() or not Path(DOCKER).exists():
        return False
    try:
        return "UP" in ctld("scontrol", "ping", check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False


def config() -> dict[str, str]:
    """``scontrol show config`` as a dict."""
    out: dict[str, str] = {}
    for line in ctld("scontrol", "show", "config").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def has_accounting() -> bool:
    try:
        return config().get("AccountingStorageType") == "accounting_storage/slurmdbd"
    except (AssertionError, OSError, subprocess.TimeoutExpired):
        return False


def version() -> tuple[int, int]:
    match = re.search(r"(\d+)\.(\d+)", ctld("scontrol", "--version"))
    assert match is not None
    return int(match[1]), int(match[2])


def token(user: str = "root", lifespan_s: int = 1800) -> str:
    out = ctld("scontrol", "token", f"username={user}", f"lifespan={lifespan_s}")
    return out.strip().removeprefix("SLURM_JWT=")


def cli_backend(user: str | None = None) -> CliSlurm:
    """The cli backend running the Slurm commands in slurmctld (as ``user``, default root)."""
    prefix = [DOCKER, "exec", *(["-u", user] if user else []), CTLD]
    return CliSlurm(SlurmSettings(command_prefix=prefix, gres_conf=GRES_CONF))


def rest_backend(user: str = "root") -> RestSlurm:
    return RestSlurm(
        SlurmSettings(
            backend="rest",
            rest_url=REST_URL,
            rest_user=user,
            rest_token=token(user),
            gres_conf=GRES_CONF,
        )
    )


def sbatch(*opts: str, user: str | None = None, wrap: str = "sleep 600") -> str:
    out = ctld("sbatch", "--parsable", *opts, "--wrap", wrap, user=user)
    return out.strip().split(";")[0]


def job_states(job_ids: list[str]) -> dict[str, str]:
    out = ctld("squeue", "-h", "-j", ",".join(job_ids), "-o", "%i %T")
    return dict(line.split() for line in out.splitlines() if line.strip())


def wait_running(job_ids: list[str], timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        states = job_states(job_ids)
        if all(states.get(j) == "RUNNING" for j in job_ids):
            return
        time.sleep(1)
    raise AssertionError(f"jobs did not all start within {timeout_s:g} s: {states}")


def wait_evaluated(job_id: str, timeout_s: float = 60) -> str:
    """Wait until the scheduler has looked at a pending job: its reason is no longer
    ``None`` (or it is no longer pending). Returns the reason, or the new state.

    In place of a fixed sleep before a "still pending" check: that check then runs as soon
    as slurmctld has decided, and never before (sched_interval=2 in docker/slurm/slurm.conf).
    """
    deadline = time.monotonic() + timeout_s
    seen: list[str] = []
    while time.monotonic() < deadline:
        seen = ctld("squeue", "-h", "-j", job_id, "-o", "%T %r", check=False).split()
        if len(seen) >= 2 and seen[0] == "PENDING" and seen[1] != "None":
            return seen[1]
        if seen and seen[0] != "PENDING":
            return seen[0]
        time.sleep(1)
    raise AssertionError(f"job {job_id} not evaluated within {timeout_s:g} s: {seen}")


def node_weights() -> dict[str, int]:
    """Every node's current ``Weight`` (``sinfo``)."""
    out = ctld("sinfo", "-h", "-N", "-o", "%N %w")
    return {n: int(w) for n, w in (ln.split() for ln in set(out.splitlines()) if ln.strip())}


def restore_weights(before: dict[str, int]) -> dict[str, int]:
    """Put back every Weight that differs from ``before`` (a test must never leave the
    cluster changed, even on failure); returns the Weights found before restoring."""
    after = node_weights()
    for node, w in before.items():
        if after.get(node) != w:
            ctld("scontrol", "update", f"NodeName={node}", f"Weight={w}", check=False)
    return after


def node_states() -> dict[str, str]:
    """sinfo's short state per node (``idle``, ``mix``, ``drain``, ``idle*``, ...)."""
    out = ctld("sinfo", "-h", "-N", "-o", "%N %t", check=False)
    return dict(line.split() for line in sorted(set(out.splitlines())) if line.strip())


def responding(state: str) -> bool:
    """A registered node: no ``*``/``~``/``#`` suffix, not unknown, down or failed."""
    return bool(re.fullmatch(r"[a-z]+", state)) and not state.startswith(
        ("unk", "down", "fail", "inval")
    )


def wait_nodes_responding(nodes: list[str], timeout_s: float = 150) -> dict[str, str]:
    """Wait until slurmctld answers and every node in ``nodes`` has registered."""
    deadline = time.monotonic() + timeout_s
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        try:
            states = node_states()
        except (OSError, subprocess.TimeoutExpired):
            states = {}
        if states and all(responding(states.get(n, "")) for n in nodes):
            return states
        time.sleep(2)
    raise AssertionError(f"nodes {nodes} not back within {timeout_s:g} s: {states}")


def slurm_defrag(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The installed ``slurm-defrag`` console script, without SLURM_DEFRAG_* settings."""
    exe = Path(sys.executable).parent / "slurm-defrag"
    argv = [str(exe)] if exe.exists() else [sys.executable, "-m", "slurm_defrag.cli"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_DEFRAG_")}
    return subprocess.run(
        [*argv, *args], capture_output=True, text=True, timeout=timeout, check=False, env=env
    )


_held = 0
"""How deep this process is in :func:`exclusive_cluster` (0: not holding it)."""


@contextmanager
def exclusive_cluster() -> Iterator[None]:
    """Hold the cluster of this ``SLURM_SUITE`` for one scenario.

    Scenarios that need exact GPU placements (course scenario, fault injection, the
    simulator cross-check) would be broken by another run's jobs on the same nodes. In CI
    the live tests run one after another, so the lock is free; on a shared development
    machine it makes concurrent runs take turns instead of failing each other.
    """
    global _held
    if _held:  # re-entered in this process (a module fixture holds it around a test that
        _held += 1  # takes it too): flock on a second open file would wait on ourselves
        try:
            yield
        finally:
            _held -= 1
        return
    path = Path(f"/tmp/{PROJECT}.lock")
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        _held = 1
        try:
            yield
        finally:
            _held = 0
            fcntl.flock(fh, fcntl.LOCK_UN)
