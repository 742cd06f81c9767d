"""Live: epilog-slurmctld as the compose cluster's EpilogSlurmctld.

A stand-in for the service's trigger endpoint listens on this host; the slurmctld
container reaches it through its network gateway. Ending a GPU job must reach it within
2 s; with the service down or hanging, jobs must still end normally and at once.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from plugins.plugins_support import (
    EPILOG_LOG,
    Cluster,
    Installed,
    TriggerListener,
    free_port,
    set_epilog_url,
)

pytestmark = pytest.mark.slurm

# Polls the job from inside the container every 50 ms and prints "<ms> <state>" at each
# change; the COMPLETING phase lasts as long as EpilogSlurmctld runs.
WATCH = r"""
j=$1; prev=; start=$(date +%s%N)
for i in $(seq 600); do
    st=$(squeue -h -j "$j" -o %T 2>/dev/null)
    if [ "$st" != "$prev" ]; then
        echo "$(( ($(date +%s%N) - start) / 1000000 )) ${st:-GONE}"; prev=$st
    fi
    [ -z "$st" ] && break
    sleep 0.05
done
"""


def end_epoch(c: Cluster, job: str) -> int:
    end = c.job_field(job, "EndTime")
    return int(c.sh(f"date -d '{end}' +%s").strip())


def completing_ms(c: Cluster, job: str) -> tuple[int, str]:
    """How long the job stayed COMPLETING (ms), and the watch transcript."""
    out = c.run("bash", "-c", WATCH, "watch", job, timeout=60).stdout
    seen = [(int(t), s) for t, s in (line.split() for line in out.splitlines())]
    start = next((t for t, s in seen if s == "COMPLETING"), None)
    if start is None:
        return 0, out
    after = next(t for t, s in seen if t > start)
    return after - start, out


def final_state(c: Cluster, job: str) -> tuple[str, str]:
    return c.job_field(job, "JobState"), c.job_field(job, "ExitCode")


@pytest.fixture
def url_restored(installed: Installed, tmp_path: Path) -> Iterator[None]:
    yield
    set_epilog_url(installed.cluster, installed.url, tmp_path)


def test_gpu_job_end_triggers_a_cycle_within_2s(installed: Installed) -> None:
    c = installed.cluster
    rc, job, err = c.sbatch("--gres=gpu:1", wrap="sleep 2")
    assert rc == 0, err
    hit = installed.listener.wait_for(f'"job_id":"{job}"', timeout_s=90)
    assert hit is not None, c.sh(f"tail -5 {EPILOG_LOG}", check=False)
    ended = end_epoch(c, job)
    # EndTime has whole seconds, so this bounds the real delay from above
    assert hit.at - ended < 2.0, f"trigger {hit.at - ended:.2f} s after the job ended"
    assert f'"nodes":"{c.job_field(job, "NodeList")}"' in hit.body
    assert final_state(c, job) == ("COMPLETED", "0:0")


def test_gpu_jobs_ending_together_each_trigger(installed: Installed) -> None:
    """Slurm kills an epilog's process group when it exits (24.11): every worker must
    have detached first, also when several epilogs run at once."""
    c = installed.cluster
    jobs = []
    for _ in range(4):
        rc, job, err = c.sbatch("--gres=gpu:1", wrap="sleep 1")
        assert rc == 0, err
        jobs.append(job)
    for job in jobs:
        assert installed.listener.wait_for(f'"job_id":"{job}"', timeout_s=90) is not None, job


def test_cpu_job_end_does_not_trigger(installed: Installed) -> None:
    c = installed.cluster
    rc, job, err = c.sbatch(wrap="sleep 1")
    assert rc == 0, err
    deadline = time.monotonic() + 90
    while c.job_field(job, "JobState") != "COMPLETED" and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(2)
    assert installed.listener.wait_for(f'"job_id":"{job}"', timeout_s=0.1) is None
    assert re.search(rf"job {job}: no GPUs, no trigger", c.sh(f"cat {EPILOG_LOG}"))


@pytest.mark.parametrize("service", ["stopped", "hanging"])
def test_jobs_end_normally_and_quickly_when_the_service_is_down(
    installed: Installed, url_restored: None, tmp_path: Path, service: str
) -> None:
    c = installed.cluster
    hang = TriggerListener(hang=True) if service == "hanging" else None
    port = hang.port if hang else free_port()
    try:
        set_epilog_url(c, f"http://{c.gateway()}:{port}/trigger", tmp_path)
        rc, job, err = c.sbatch("--gres=gpu:1", wrap="sleep 1")
        assert rc == 0, err
        took, transcript = completing_ms(c, job)
        assert took < 800, f"COMPLETING for {took} ms:\n{transcript}"
        assert final_state(c, job) == ("COMPLETED", "0:0")
        # the worker gave up on its own, within the 1 s timeout
        deadline = time.monotonic() + 5
        log = ""
        while time.monotonic() < deadline:
            log = c.sh(f"grep 'job {job}:' {EPILOG_LOG} || true")
            if "trigger failed" in log:
                break
            time.sleep(0.2)
        assert "trigger failed" in log, log
        assert ("curl exit 28" if hang else "curl exit 7") in log
    finally:
        if hang:
            hang.close()
