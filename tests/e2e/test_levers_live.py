"""Live: the packing lever keeps a whole NVLink node for an 8-GPU job, with no requeue.

The arrival sequence (issue #14, item 5), on the two a100 nodes of the compose cluster
(equal Weight, so cons_tres takes node01 first):

1. R, a long 4-GPU job, runs on node02 (``-w``: what earlier arrivals left there);
2. S, a 4-GPU job with no node named, arrives;
3. T, an 8-GPU job (one NVSwitch node), arrives.

Plain Slurm (no service): S goes to node01, the lowest node with room, and T waits
although 8 a100 GPUs are free (4 on each node). With the service in enforce mode and
packing on, node01 is idle at S's arrival, so its Weight was raised by the service's cycle:
S goes to node02 beside R, and T starts on node01 at once. The policy there can neither
requeue nor drain, so the lever alone does it; every job ends COMPLETED with no restart,
and the service gives node01 its Weight back when it stops.

The case where levers are not enough and defrag must requeue is
``test_service_live.test_enforce_frees_the_block_survives_a_crash_and_one_instance_acts``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_cluster import exclusive_cluster, job_states, restore_weights, sbatch
from test_service_live import (
    FAST,
    Scenario,
    _container_scenario,
    _mount_dir,
    _require_idle,
    _service,
    _show,
    _wait,
    _weights,
)
from test_service_live import _cleanup as cleanup_scenario

pytestmark = pytest.mark.slurm

NODES = ("node01", "node02")
"""The a100 nodes: the only ones ``--gres=gpu:a100:N`` can run on."""
BUMP = 1000


def _submit(sc: Scenario, role: str, gpus: int, secs: int, *opts: str) -> str:
    sc.jobs[role] = sbatch(
        *opts, f"--gres=gpu:a100:{gpus}", "-t", "5", "-J", f"svc-e2e-{role}", wrap=f"sleep {secs}"
    )
    return sc.jobs[role]


def _running_on(job: str, timeout_s: float = 60) -> str:
    _wait(f"job {job} running", lambda: job_states([job]).get(job) == "RUNNING", timeout_s)
    return _show(job)["NodeList"]


def _arrive(sc: Scenario, t_secs: int) -> tuple[str, str]:
    """Steps 1-3 of the module docstring; returns where S runs and T's id."""
    _running_on(_submit(sc, "R", 4, 150, "-w", "node02"))
    s_node = _running_on(_submit(sc, "S", 4, 150))
    return s_node, _submit(sc, "T", 8, t_secs)


@pytest.fixture
def quiet(tmp_path: Path) -> Iterator[Scenario]:
    """The two a100 nodes idle and held by this test; its jobs and service cleaned up."""
    with exclusive_cluster():
        _require_idle()
        sc = _container_scenario(tmp_path)
        before = _weights()
        try:
            yield sc
        finally:
            cleanup_scenario(sc)
            restore_weights(before)


def test_plain_slurm_splits_node01_and_the_8_gpu_job_waits(quiet: Scenario) -> None:
    sc = quiet
    s_node, t = _arrive(sc, 20)
    assert s_node == "node01"  # cons_tres: lowest Weight, then node order
    time.sleep(10)  # several scheduling passes: T stays pending although 8 GPUs are free
    shown = _show(t)
    assert shown["JobState"] == "PENDING", shown["_text"]
    assert shown.get("Reason") in {"Resources", "Priority"}, shown["_text"]


def test_weight_lever_keeps_node01_whole_and_the_8_gpu_job_starts_without_requeue(
    quiet: Scenario,
) -> None:
    sc = quiet
    original = _weights()
    policy = _mount_dir(sc.workdir) / "policy.toml"
    policy.write_text("version = 1\n[limits]\nmax_victims_per_plan = 0\n[drain]\nenabled = false\n")
    service = _service(
        sc,
        "levers",
        user="root",  # node weights need Slurm Admin rights (docker/README.md "Privileges")
        mode="enforce",
        **FAST,
        packing=True,
        packing_weight_bump=BUMP,
        policy="/etc/slurm-defrag/test/policy.toml",
        files={"/etc/slurm-defrag/test": sc.workdir},
    )
    _wait("node01 and node02 raised", lambda: _raised(original) >= set(NODES), 90)
    _running_on(_submit(sc, "R", 4, 60, "-w", "node02"))
    # node02 is in use now: the next cycle gives it its Weight back, node01 keeps the bump.
    _wait("node02 back to its Weight", lambda: _raised(original) & set(NODES) == {"node01"}, 60)
    assert _running_on(_submit(sc, "S", 4, 30)) == "node02", service.logs()
    t = _submit(sc, "T", 8, 20)
    assert _running_on(t, 30) == "node01", service.logs()

    all_completed_without_restart(sc, ("R", "S", "T"))
    code = service.stop()
    log = service.logs()
    assert code == 0, log
    assert _weights() == original, log


def all_completed_without_restart(sc: Scenario, roles: tuple[str, ...]) -> None:
    """Wait for these jobs to end; each still known to slurmctld (MinJobAge) COMPLETED,
    never requeued."""
    _wait("the jobs ended", lambda: not job_states([sc.jobs[r] for r in roles]), 120, 2)
    for role in roles:
        shown = _show(sc.jobs[role])
        if shown.get("JobState"):
            assert shown["JobState"] == "COMPLETED", shown["_text"]
            assert shown.get("Restarts") == "0", shown["_text"]


def _raised(original: dict[str, int]) -> set[str]:
    return {n for n, w in _weights().items() if w >= original.get(n, 0) + BUMP}
