"""Live: job_submit.lua's ``short_first`` in a real slurmctld (priority/multifactor).

What the simulator's ``~short`` assumes and this records on each release:

* the script reads ``job_desc.nice`` raw (NO_VAL when unset, nice + NICE_OFFSET when the
  user gave ``--nice``) and what it writes back is stored as Nice = value - NICE_OFFSET:
  a job shows Nice = -(tier x span + span - its limit in minutes), plus its own nice;
* Slurm checks a user's negative nice before job_submit runs, so the script's negative
  nice stands for an ordinary user too (bob here);
* the nice comes off the job's priority (multifactor: Priority = factors - nice), so of
  two jobs of one tier waiting together the one with the shorter limit goes first. A
  positive nice would not do here: on this cluster's default QOS every job has priority
  1, the floor multifactor never goes below (recorded on 22.05).

The compose cluster has four GPU nodes; only node03 has A100-80GB and only node04 H100s
(NVLink pairs), so with ``share = 0.25`` jobs of those types count as scarce (tier 2),
an 8-GPU A100 job (node01-02) is large (tier 1, ``large_gpus = 4``) and every other job
goes by its limit alone (``all``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from plugins.plugins_support import Cluster, Installed, table_with

from .test_live_packing import node_of

pytestmark = pytest.mark.slurm

SPAN = 600
ENTRY = f"  short_first = {{ share = 0.25, span = {SPAN}, large_gpus = 4, all = true }},\n"


def boost(tier: int, limit_min: int | None) -> int:
    """What the script adds to a job's priority."""
    return tier * SPAN + (max(0, SPAN - limit_min) if limit_min is not None else 0)


@pytest.fixture
def short_first(installed: Installed, tmp_path: Path) -> Iterator[Cluster]:
    c = installed.cluster
    with table_with(c, tmp_path, ENTRY):
        yield c


def _nice(c: Cluster, *opts: str, user: str | None = None) -> int:
    if user is None:
        rc, job, err = c.sbatch("-H", *opts)
    else:
        proc = c.run(
            "runuser", "-u", user, "--", "sbatch", "--parsable", "-J", "defrag-plugin-test",
            "-H", *opts, "--wrap", "sleep 300", check=False,
        )  # fmt: skip
        rc, job, err = proc.returncode, proc.stdout.strip().split(";")[0], proc.stderr
        if rc == 0:
            c.created_jobs.append(job)
    assert rc == 0, err
    return int(c.job_field(job, "Nice"))


def test_every_job_gets_its_tier_and_limit_as_a_negative_nice(short_first: Cluster) -> None:
    c = short_first
    assert _nice(c, "--gres=gpu:a100-80g:8", "-t", "30") == -boost(2, 30)
    assert _nice(c, "--gres=gpu:h100:2", "-t", "1:30:00") == -boost(2, 90)
    assert _nice(c, "--gres=gpu:h100:2", "-t", "30", "--nice=5") == 5 - boost(2, 30)
    assert _nice(c, "--gres=gpu:h100:2", "-t", "30", user="bob") == -boost(2, 30)
    assert _nice(c, "--gres=gpu:h100:2", "-t", "12:00:00") == -boost(2, 720)
    assert _nice(c, "--gres=gpu:a100:8", "-t", "30") == -boost(1, 30)  # two nodes hold it
    assert _nice(c, "--gres=gpu:8", "-t", "30") == -boost(1, 30)
    assert _nice(c, "--gres=gpu:a100:1", "-t", "30") == -boost(0, 30)
    assert _nice(c, "-c", "1", "-t", "30") == -boost(0, 30)  # no GPU
    assert _nice(c, "-c", "1") == 0  # no limit given: nothing to go by


def test_the_shorter_limit_goes_first(short_first: Cluster) -> None:
    """Two H100 jobs wait for node04, which a whole-node job holds (held or --begin jobs
    would show priority 0 or 1): the one submitted second, with the shorter limit, has
    the higher priority, by the difference of the limits."""
    c = short_first
    rc, blocker, err = c.sbatch("-w", "node04", "--exclusive", "-t", "10")
    assert rc == 0, err
    assert node_of(c, blocker) == "node04"
    jobs = []
    for limit in ("3:00:00", "20"):
        rc, job, err = c.sbatch("--gres=gpu:h100:2", "-t", limit)
        assert rc == 0, err
        jobs.append(job)
    long_job, short_job = (int(c.job_field(j, "Priority")) for j in jobs)
    assert short_job - long_job >= 180 - 20 - 5, (short_job, long_job)  # give or take age
    assert {c.job_field(j, "JobState") for j in jobs} == {"PENDING"}
