"""Live (#40): a user's GPU request the readers cannot understand never stops a cycle.

Slurm 24.11 holds ``--gres=gpu:abc:xyz:1`` instead of refusing it; before the fix, such a
record failed the whole snapshot (``gpu_ask`` raised), so every service cycle failed for
everyone while the job sat in the queue. Here bob submits each odd request of ``ODD``
(held, so it never runs) on the real cluster, without job_submit.lua (the hook refuses
them where it is installed: ``live_hooks/test_live_submit.py``). Whatever this release
accepts, then:

* every reader (cli JSON, cli text only, rest) reads a snapshot; each odd job is in it,
  ``unreadable`` naming the field, never a target; every other job reads as before;
* ``slurm-defrag serve`` (dry-run) runs cycle after cycle, none failing, and counts the
  unreadable records in ``slurm_defrag_unreadable_jobs_total``.

Which requests each release accepts is asserted from what was recorded live (record,
then believe): the docstring of ``ACCEPTED``.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from host_service import free_port, scrape, start
from live_cluster import (
    CTLD,
    DOCKER,
    GRES_CONF,
    cluster_is_up,
    ctld,
    dexec,
    rest_backend,
    version,
)

from infra import ROOT, require
from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.policy.file import load_policy
from slurm_defrag.slurm.cli_backend import CliSlurm
from slurm_defrag.slurm.command_runner import CommandResult, subprocess_runner
from slurm_defrag.slurm.connection import SlurmSettings

pytestmark = [pytest.mark.slurm, pytest.mark.newsuite]

SUBMITTED = (
    "gpu:abc:xyz:1",
    "gpu:1,shard:abc:xyz:1",
    "gpu:1,mps:1:2:3",
    "gpu:1,foo:99999999999999999999",
    "gpu:1,gpu:2",  # odd but valid: 22.05 holds both
    "gpu:a100:2,gpu:h100:1",
)
"""``sbatch --gres=...`` as bob"""
UPDATED = (
    "gres/gpu:abc:xyz:1",
    "gres/gpu:1,gres/shard:abc:xyz:1",
    "gres/gpu:1,gres/mps:1:2:3",
    "gres/gpu:1,gres/foo:99999999999999999999",
)
"""``scontrol update JobId=<his held job> TresPerNode=...`` as bob: 22.05 takes each one
verbatim from the job's owner (recorded), though its sbatch refuses them"""
NAME = "odd-gres-e2e"
POLICY = ROOT / "docker" / "defrag" / "policy.toml"


@dataclass
class Odd:
    accepted: dict[str, str] = field(default_factory=dict)
    """how it was asked ("sbatch gpu:..." / "update gres/...") -> job id (held)"""
    refused: dict[str, str] = field(default_factory=dict)
    """how it was asked -> what Slurm said"""
    plain: str = ""
    """a held job with an ordinary request, read beside them"""


def _as_bob(*argv: str) -> subprocess.CompletedProcess[str]:
    return dexec("slurmctld", *argv, user="bob", check=False)


def _held(gres: str) -> subprocess.CompletedProcess[str]:
    return _as_bob("sbatch", "--parsable", "-H", "-J", NAME, f"--gres={gres}", "--wrap", "true")


@pytest.fixture(scope="module")
def odd() -> Iterator[Odd]:
    require(cluster_is_up(), "the compose Slurm cluster")
    o = Odd()
    try:
        for gres in SUBMITTED:
            proc = _held(gres)
            if proc.returncode == 0:
                o.accepted[f"sbatch {gres}"] = proc.stdout.strip().split(";")[0]
            else:
                o.refused[f"sbatch {gres}"] = proc.stderr.strip()
        for tres in UPDATED:
            job = _held("gpu:1").stdout.strip().split(";")[0]
            assert job, "a held 1-GPU job of bob's"
            proc = _as_bob("scontrol", "update", f"JobId={job}", f"TresPerNode={tres}")
            shown = ctld("scontrol", "show", "job", job)
            if proc.returncode == 0 and f"TresPerNode={tres}" in shown:
                o.accepted[f"update {tres}"] = job
            else:
                o.refused[f"update {tres}"] = proc.stderr.strip() or shown
        o.plain = _held("gpu:2").stdout.strip().split(";")[0]
        print(f"\nodd GRES live ({version()}): accepted {sorted(o.accepted)}, refused {o.refused}")
        yield o
    finally:
        ctld("scancel", "-n", NAME, check=False)


def text_only(argv: Sequence[str], timeout_s: float) -> CommandResult:
    """The cli backend as on a Slurm without ``--json``."""
    if "--json" in argv:
        return subprocess.CompletedProcess(list(argv), 1, "", "unrecognized option '--json'")
    return subprocess_runner(argv, timeout_s)


def readers() -> dict[str, ClusterSnapshot]:
    settings = SlurmSettings(command_prefix=[DOCKER, "exec", CTLD], gres_conf=GRES_CONF)
    return {
        "cli": CliSlurm(settings).snapshot(),
        "text": CliSlurm(settings, runner=text_only).snapshot(),
        "rest": rest_backend().snapshot(),
    }


def test_this_release_takes_odd_requests_from_a_user(odd: Odd) -> None:
    """What each release was recorded doing: 24.11 and later hold ``--gres=gpu:abc:xyz:1``
    (the finding); 22.05's sbatch refuses it and every other unparseable one, but takes
    each of them from the job's owner through ``scontrol update``."""
    assert len(odd.accepted) + len(odd.refused) == len(SUBMITTED) + len(UPDATED)
    if version() >= (24, 11):
        assert "sbatch gpu:abc:xyz:1" in odd.accepted, odd.refused
    else:
        assert {f"sbatch {g}" for g in SUBMITTED[:4]} <= set(odd.refused), odd.accepted
        assert {f"update {t}" for t in UPDATED} <= set(odd.accepted), odd.refused
    assert odd.accepted, "nothing odd reached the queue: the readers are not tested here"


def test_every_reader_reads_past_the_odd_jobs(odd: Odd) -> None:
    for how, snap in readers().items():
        jobs = snap.job_by_id
        assert odd.plain in jobs, how
        plain = jobs[odd.plain]
        assert (plain.unreadable, plain.request and plain.request.gpus) == ("", 2), how
        for asked, job_id in odd.accepted.items():
            job = jobs.get(job_id)
            assert job is not None, f"{how}: job {job_id} ({asked}) left out"
            if job.unreadable:
                assert job.request is None, (how, asked)
        # never a target (nor a victim: they are held, not running)
        plan = make_plan(snap, load_policy(POLICY))
        named = {t.job_id for t in plan.targets} | {v.job_id for v in plan.victims}
        assert not named & set(odd.accepted.values()), (how, named)


def test_the_service_runs_every_cycle(odd: Odd, tmp_path: Path) -> None:
    port = free_port()
    service = start(tmp_path, port, interval_s=2)
    got: dict[str, float] = {}
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                samples = scrape(port)
            except OSError:
                samples = {}  # not listening yet
            got = {lab["outcome"]: v for lab, v in samples.get("slurm_defrag_cycles_total", [])}
            if sum(got.values()) >= 3:
                break
            time.sleep(1)
    finally:
        service.send_signal(signal.SIGTERM)
        code = service.wait(timeout=60)
    log = (tmp_path / "serve.log").read_text()
    assert code == 0, log
    assert sum(got.values()) >= 3, (got, log[-3000:])
    failed = {k: v for k, v in got.items() if k in ("error", "slurm-unavailable") and v}
    assert not failed, log[-3000:]
    unreadable = sum(v for _, v in samples.get("slurm_defrag_unreadable_jobs_total", []))
    assert unreadable >= 1, log[-3000:]
