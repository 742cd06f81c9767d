"""Live (#40): one user's many large jobs stop making the service requeue others once her
daily budget is spent.

The service runs in enforce mode (its container, FAST settings) with a policy whose
beneficiary budget is one requeue a day (``max_requeues_for_user_per_day = 1``; the
default is 16, docs/planner.md "Fairness per user"). Bob holds one A100 of node01 and one
of node02, so no A100 node has 8 free GPUs; Alice submits three 8-A100 jobs. The service
requeues one of Bob's jobs for Alice's first (her budget: spent), and then nothing more:
her other two wait, Bob's other job keeps running, no second plan is made, and each
cycle's "no plan" line names the budget. (node03's A100-80g and node04's H100 are other
GPU types: Alice's jobs cannot start there.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from live_cluster import cluster_is_up, exclusive_cluster, job_states, sbatch, wait_evaluated
from service_container import ServiceContainer
from test_service_live import (
    FAST,
    Scenario,
    _cleanup,
    _container_scenario,
    _mount_dir,
    _plans,
    _require_idle,
    _service,
    _show,
    _wait,
)

from infra import require

pytestmark = pytest.mark.slurm

POLICY = """version = 1
[protections]
min_runtime_minutes = 0
extra = ["large-job"]
[limits]
max_requeues_for_user_per_day = 1
[drain]
enabled = false
"""
# The site setting for large jobs (examples/policy-large-jobs.toml, as in the simulated
# day of tests/service/test_fairness.py): a started 8-GPU job is never the next one's
# victim. Without it the service swapped Alice's own 8-GPU jobs, one for the other, every
# cycle (seen here live; her own jobs are not others' work, so no beneficiary limit
# counts them); the planner's swap rule now refuses that under any policy
# (docs/planner.md, "The swap rule"). Drains requeue nothing, so they serve a user
# whatever her budget (by design): off here, so that only requeues can free a block
# (they would also need Slurm Admin rights; the service runs as the compose Operator
# account).


@pytest.fixture
def crowded(tmp_path: Path) -> Iterator[Scenario]:
    require(cluster_is_up(), "the compose Slurm cluster (scripts/cluster.sh up)")
    with exclusive_cluster():
        _require_idle()
        sc = _container_scenario(tmp_path)
        try:
            for node in ("node01", "node02"):
                role = f"bob-{node}"
                sc.jobs[role] = sbatch(
                    "-w", node, "--gres=gpu:a100:1", "-t", "60", "-J", f"svc-e2e-{role}",
                    user="bob", wrap="sleep 600",
                )  # fmt: skip
            _wait(
                "Bob's jobs running",
                lambda: set(job_states(sc.ids()).values()) == {"RUNNING"},
                60,
            )
            for k in range(3):
                sc.jobs[f"alice-{k}"] = sbatch(
                    "--gres=gpu:a100:8", "-t", "60", "-J", f"svc-e2e-alice-{k}",
                    user="alice", wrap="sleep 600",
                )  # fmt: skip
            wait_evaluated(sc.jobs["alice-2"])
            yield sc
        finally:
            _cleanup(sc)


def _logged_wait(
    svc: ServiceContainer, what: str, cond: Callable[[], bool], timeout_s: float
) -> None:
    try:
        _wait(what, cond, timeout_s)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the service's log:\n{svc.logs()[-5000:]}") from None


def test_one_user_many_large_jobs_spends_her_budget_then_waits(crowded: Scenario) -> None:
    sc = crowded
    policy = _mount_dir(sc.workdir) / "policy.toml"
    policy.write_text(POLICY)
    svc = _service(
        sc,
        "fair",
        mode="enforce",
        **FAST,
        policy="/etc/slurm-defrag/test/policy.toml",
        files={"/etc/slurm-defrag/test": sc.workdir},
    )
    alice = [sc.jobs[f"alice-{k}"] for k in range(3)]
    bob = [sc.jobs["bob-node01"], sc.jobs["bob-node02"]]

    def alice_running() -> list[str]:
        states = job_states(alice)
        return [j for j in alice if states.get(j) == "RUNNING"]

    _logged_wait(svc, "one of Alice's jobs running", lambda: len(alice_running()) == 1, 180)
    # Her budget is spent: the next cycle plans nothing and says why (every cycle does
    # until the planner inputs change; one such line is what we wait for).
    _logged_wait(
        svc,
        "a cycle naming her budget",
        lambda: "limits.max_requeues_for_user_per_day leaves alice 0 more" in svc.logs(),
        120,
    )
    cycles = svc.logs().count("cycle: snapshot #")
    _logged_wait(
        svc, "two more cycles", lambda: svc.logs().count("cycle: snapshot #") >= cycles + 2, 60
    )
    log = svc.logs()
    assert svc.stop() == 0, log
    restarts = {j: int(_show(j).get("Restarts", "0")) for j in bob}
    assert sorted(restarts.values()) == [0, 1], restarts  # one of Bob's jobs, once
    assert len(alice_running()) == 1, log[-3000:]
    enforce = [p for p in _plans(sc) if p[1] == "enforce"]
    assert [(status, [v.job_id for v in plan.victims]) for _, _, status, _, plan in enforce] == [
        ("done", [j for j, n in restarts.items() if n == 1])
    ], log[-3000:]
