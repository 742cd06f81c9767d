"""The live cluster: slurmctld's part of what the service does to Slurm, in simulated time.

Each test states the rule of slurmctld it checks (sim/live.py's docstring lists them);
times are simulated seconds from the epoch.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from simkit import job, node

from slurm_defrag.domain.cluster import JobState
from slurm_defrag.policy.comment_keys import CHECKPOINT_KEY
from slurm_defrag.sim.live import MIN_JOB_AGE_S, REQUEUE_DELAY_S, LiveCluster, Refused

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def cluster(*nodes: tuple[str, int], topology: str | None = None) -> LiveCluster:
    return LiveCluster([node(n, g, topology=topology) for n, g in nodes], EPOCH)


def gpus_of(c: LiveCluster, job_id: str) -> dict[str, set[int]]:
    j = c.snapshot().job_by_id[job_id]
    return {n: set(g) for n, g in j.gpus.items()}


def test_jobs_start_in_node_order_on_the_lowest_gpus_and_end_after_their_run() -> None:
    c = cluster(("n0", 4), ("n1", 4))
    c.submit("1", job("a", num=2, duration=100, user="u"))
    c.submit("2", job("b", num=3, duration=50, submit=10))
    c.advance(10)
    assert gpus_of(c, "1") == {"n0": {0, 1}}
    assert gpus_of(c, "2") == {"n1": {0, 1, 2}}  # 2 left on n0: the next node
    c.advance(100)
    snap = c.snapshot()
    assert snap.job_by_id["1"].state == snap.job_by_id["2"].state == JobState.COMPLETED
    assert snap.node_by_name["n0"].gpus_used == frozenset()
    c.advance(60 + MIN_JOB_AGE_S + 1)  # job 2 ended at 60: gone from the queue
    assert set(c.snapshot().job_by_id) == {"1"}


def test_a_job_is_not_seen_before_its_submit_time() -> None:
    c = cluster(("n0", 4))
    c.submit("1", job("a", submit=30))
    c.advance(29)
    assert c.snapshot().jobs == ()
    with pytest.raises(Refused, match="Invalid job id"):
        c.requeue("1")
    c.advance(30)
    assert c.snapshot().job_by_id["1"].state == JobState.RUNNING


def test_requeue_frees_the_gpus_and_the_job_runs_again_after_its_begin_time() -> None:
    c = cluster(("n0", 4))
    c.submit("1", job("a", num=2, duration=1000))
    c.advance(360)
    c.requeue("1")
    snap = c.snapshot()
    assert snap.job_by_id["1"].state == JobState.PENDING
    assert snap.job_by_id["1"].reason == "BeginTime"
    assert snap.job_by_id["1"].request is not None
    assert snap.node_by_name["n0"].gpus_used == frozenset()
    assert c.stats.requeues == 1
    assert c.stats.lost_gpu_h == pytest.approx(2 * 360 / 3600)  # no checkpoint: all of it
    c.requeue("1")  # pending already: nothing happens (the port's idempotence)
    assert c.stats.requeues == 1
    c.advance(360 + REQUEUE_DELAY_S - 1)
    assert c.jobs["1"].state == JobState.PENDING
    c.advance(360 + REQUEUE_DELAY_S)
    assert c.jobs["1"].state == JobState.RUNNING
    c.advance(360 + REQUEUE_DELAY_S + 999)
    assert c.jobs["1"].state == JobState.RUNNING  # it runs its whole 1000 s again
    c.advance(360 + REQUEUE_DELAY_S + 1000)
    assert c.jobs["1"].state == JobState.COMPLETED


def test_a_checkpointing_job_loses_only_the_work_since_its_checkpoint() -> None:
    c = cluster(("n0", 4))
    c.submit("1", job("a", num=1, duration=1000, ckpt_interval=300))
    c.advance(400)
    comment = c.snapshot().job_by_id["1"].comment
    assert comment == f"{CHECKPOINT_KEY}={EPOCH.timestamp() + 300:.0f}"
    c.requeue("1")
    assert c.stats.lost_gpu_h == pytest.approx(100 / 3600)
    c.advance(400 + REQUEUE_DELAY_S)  # starts again, 700 s of work left
    c.advance(400 + REQUEUE_DELAY_S + 700)
    assert c.jobs["1"].state == JobState.COMPLETED


def test_a_reservation_keeps_its_nodes_for_the_jobs_that_name_it() -> None:
    c = cluster(("n0", 4), ("n1", 2))
    c.submit("1", job("small", num=1, duration=500, user="u"))
    c.advance(0)
    c.create_reservation("defrag-x", ["n0"], ["t"], [], 0, 900)
    c.create_reservation("defrag-x", ["n0"], ["t"], [], 0, 900)  # the same again: no-op
    with pytest.raises(Refused, match="Duplicate"):
        c.create_reservation("defrag-x", ["n1"], ["t"], [], 0, 900)
    assert c.jobs["1"].state == JobState.RUNNING  # IGNORE_JOBS: running jobs go on
    c.submit("2", job("other", num=2, duration=100, user="u", submit=10))
    c.submit("3", job("target", num=3, duration=100, user="t", submit=10))
    c.submit("4", job("stranger", num=1, duration=100, user="u", submit=10))
    c.advance(10)
    assert gpus_of(c, "2") == {"n1": {0, 1}}  # not on the reserved n0
    assert c.jobs["3"].state == JobState.PENDING  # its user is listed, but it names none
    assert c.jobs["4"].state == JobState.PENDING
    assert c.snapshot().node_by_name["n0"].reservation == "defrag-x"
    with pytest.raises(Refused, match="Access denied"):
        c.set_reservation("4", "defrag-x")
    c.set_reservation("3", "defrag-x")
    c.advance(20)
    assert gpus_of(c, "3") == {"n0": {1, 2, 3}}
    assert c.jobs["3"].started_in == "defrag-x"
    with pytest.raises(Refused, match="Reservation request busy"):
        c.delete_reservation("defrag-x")
    c.set_reservation("3", "")  # detach, then delete: what the executor does
    c.delete_reservation("defrag-x")
    c.delete_reservation("defrag-x")  # absent: success
    assert c.snapshot().reservations == ()
    assert c.jobs["3"].state == JobState.RUNNING


def test_a_job_that_names_a_reservation_runs_only_in_it() -> None:
    c = cluster(("n0", 4), ("n1", 1))
    c.submit("1", job("a", num=4, duration=100))
    c.submit("2", job("b", num=1, duration=1000))
    c.advance(0)  # n0 and n1 full
    c.create_reservation("r", ["n0"], ["u"], [], 0, 900)
    c.submit("3", job("t", num=1, user="u", submit=1))
    c.advance(1)
    c.set_reservation("3", "r")
    c.advance(50)
    assert c.jobs["3"].state == JobState.PENDING  # n0 still busy: waits in the reservation
    c.requeue("2")  # n1 free now, but the job may run only in its reservation
    c.advance(60)
    assert c.jobs["3"].state == JobState.PENDING
    c.advance(100)  # job 1 ends at 100
    assert gpus_of(c, "3") == {"n0": {0}}


def test_deleting_a_reservation_detaches_its_pending_jobs() -> None:
    c = cluster(("n0", 2))
    c.submit("1", job("a", num=2, duration=100))
    c.submit("2", job("t", num=2, user="u"))
    c.advance(0)
    c.create_reservation("r", ["n0"], ["u"], [], 0, 900)
    c.set_reservation("2", "r")
    c.delete_reservation("r")
    assert c.jobs["2"].reservation == ""
    c.advance(100)
    assert c.jobs["2"].state == JobState.RUNNING


def test_a_reservation_ends_at_its_end_time() -> None:
    c = cluster(("n0", 2))
    c.create_reservation("r", ["n0"], ["u"], [], 0, 60)
    c.submit("1", job("a", num=1, submit=1, duration=10))
    c.advance(59)
    assert c.jobs["1"].state == JobState.PENDING
    c.advance(60)
    assert c.jobs["1"].state == JobState.RUNNING
    assert c.reservations == {}


def test_the_blocked_head_gets_a_planned_start_and_only_short_jobs_use_its_node() -> None:
    c = cluster(("n0", 4))
    c.submit("1", job("long", num=2, duration=900, time_limit=1000))
    c.advance(0)
    c.submit("2", job("big", num=4, duration=100, submit=1))
    c.submit("3", job("late", num=1, duration=100, time_limit=5000, submit=2))
    c.submit("4", job("short", num=1, duration=100, time_limit=500, submit=3))
    c.advance(3)
    snap = c.snapshot()
    big = snap.job_by_id["2"]
    assert big.reason == "Resources"
    assert big.planned_start is not None
    assert (big.planned_start - EPOCH).total_seconds() == 1000  # job 1's time limit
    assert snap.job_by_id["3"].state == JobState.PENDING  # would delay big
    assert snap.job_by_id["4"].state == JobState.RUNNING  # ends before big may start
    c.advance(900)  # job 1 ends early (its run, not its limit): big starts at once
    c.advance(903)
    assert c.jobs["2"].state == JobState.RUNNING


def test_an_nvlink_job_needs_a_free_block() -> None:
    c = cluster(("n0", 4), topology="nvlink-pairs-4")
    c.submit("1", job("a", num=1, duration=100))
    c.submit("2", job("b", num=1, duration=1000))
    c.submit("3", job("c", num=1, duration=1000))
    c.advance(0)  # 0, 1, 2 taken
    c.submit("4", job("pair", num=2, nvlink=True, submit=1))
    c.advance(50)
    assert c.jobs["4"].state == JobState.PENDING  # GPUs 3 and 0? not a pair; 3 alone
    c.advance(100)  # job 1 ends: GPU 0 free, pair (0, 1)? 1 is busy: still no pair
    assert c.jobs["4"].state == JobState.PENDING
    c.requeue("2")
    c.advance(101)
    assert gpus_of(c, "4") == {"n0": {0, 1}}


def test_drain_and_weight_steer_new_jobs() -> None:
    c = cluster(("n0", 4), ("n1", 4))
    c.drain("n0", "slurm-defrag:x consolidate")
    c.submit("1", job("a", num=1))
    c.advance(0)
    assert gpus_of(c, "1") == {"n1": {0}}
    node0 = c.snapshot().node_by_name["n0"]
    assert node0.drained
    assert node0.reason == "slurm-defrag:x consolidate"
    c.resume("n0")
    c.set_weight("n1", 10)  # a heavier node is taken last
    c.submit("2", job("b", num=1, submit=1))
    c.advance(1)
    assert gpus_of(c, "2") == {"n0": {0}}
    assert c.snapshot().node_by_name["n1"].weight == 10
    with pytest.raises(Refused):
        c.drain("n9", "x")
    with pytest.raises(Refused):
        c.drain("n1", "")


def test_a_held_job_waits_until_released() -> None:
    c = cluster(("n0", 1))
    c.submit("1", job("a", num=1, duration=100))
    c.submit("2", job("b", num=1, duration=100))
    c.advance(0)
    c.set_priority("2", 0)
    c.advance(200)
    assert c.snapshot().job_by_id["2"].reason == "JobHeldAdmin"
    assert c.jobs["2"].state == JobState.PENDING
    c.set_priority("2", 5)
    c.advance(201)
    assert c.jobs["2"].state == JobState.RUNNING
    with pytest.raises(Refused, match="no longer pending"):
        c.set_priority("2", 0)
