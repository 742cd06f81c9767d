"""Hostile jobs on the real cluster: values that read like fields, lines and records (#15).

Job owners control their job's name, comment and work directory, and Slurm prints them
verbatim in ``scontrol show job -d``. Here bob submits, next to alice's job V:

* ``name``    ``-J 'x JobId=<V> ArrayJobId=555 ArrayTaskId=3 AdminComment=defrag:protect'``
* ``nlname``  a job name with a newline and a forged ``UserId=root(0)`` line
* ``comment`` ``--comment`` with forged keys, a newline, a forged ``AdminComment=`` line and
  a forged ``JobId=<V>`` record start at column 0
* ``workdir`` ``--chdir`` a directory whose name holds a newline and then a whole forged
  ``JobId=<V>`` record copied from V's, with other GPU indices (6-7)

and then checks, for the cli backend (JSON + text cross-check, the default), the cli
backend reading text only (every ``--json`` refused) and the rest backend: the snapshot
succeeds; every hostile job is read exactly as it was submitted (the name, comment and GPU
indices Slurm's JSON holds) or - text only, where a record cannot be read unambiguously -
left out with its GPUs still busy; V and every other job are read exactly as the JSON says;
a dry-run plan never names an id that is not a real job, and is the same on every backend
that sees the same jobs.

``SLURM_DEFRAG_RECORD=1`` also writes every Slurm output the cli backend read into
``tests/fixtures/hostile-<release>/`` (the offline tests in
``tests/slurm/test_text_forgery.py`` replay them).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest
from live_cluster import (
    CTLD,
    DOCKER,
    GRES_CONF,
    ROOT,
    cluster_is_up,
    ctld,
    dexec,
    exclusive_cluster,
    rest_backend,
    version,
    wait_evaluated,
)

from infra import require
from slurm_defrag.domain.cluster import ClusterSnapshot, Job
from slurm_defrag.planner.facade import make_plan
from slurm_defrag.policy.file import load_policy
from slurm_defrag.slurm.cli_backend import CliSlurm
from slurm_defrag.slurm.command_runner import subprocess_runner
from slurm_defrag.slurm.connection import SlurmSettings

pytestmark = pytest.mark.slurm

POLICY = ROOT / "docker" / "defrag" / "policy.toml"  # min_runtime_minutes = 0
RECORD = os.environ.get("SLURM_DEFRAG_RECORD") == "1"
HOSTILE = ("name", "nlname", "comment", "workdir")


@dataclass
class Scene:
    tag: str
    jobs: dict[str, str] = field(default_factory=dict)
    """role -> job id: V (alice's), the four hostile ones, fillers f2-f4, P (pending)."""
    submitted: dict[str, dict[str, str]] = field(default_factory=dict)
    """role -> the name/comment it was submitted with (what Slurm must hold)."""
    workdir: str = ""


def sbatch(*opts: str, user: str) -> str:
    argv = [
        DOCKER,
        "exec",
        "-u",
        user,
        CTLD,
        "sbatch",
        "--parsable",
        "--requeue",
        *opts,
        "--wrap",
        "sleep 600",
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, f"sbatch {opts}: {proc.stderr.strip()}"
    return proc.stdout.strip().split(";")[0]


def wait_running(job_ids: Sequence[str], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        out = ctld("squeue", "-h", "-j", ",".join(job_ids), "-o", "%A %T")
        states = dict(line.split() for line in out.splitlines() if line.strip())
        if all(states.get(j) == "RUNNING" for j in job_ids):
            return
        time.sleep(1)
    raise AssertionError(f"jobs did not all start within {timeout_s:g} s: {states}")


def forged_record(real: str, job_id: str) -> str:
    """Job ``job_id``'s own record with GPU indices 6-7, cut to fit a directory tree.

    Path components are at most 255 bytes: whole lines are dropped where a component
    between two '/' would get longer (what is left still starts with ``JobId=<id>`` and
    holds the ``Nodes=... GRES=...(IDX:6-7)`` line).
    """
    start = real.index(f"JobId={job_id} ")
    record = real[start : real.index("\n\n", start)]
    record = re.sub(r"IDX:[0-9,-]+", "IDX:6-7", record).replace(" JobName=", " JobName=forged-", 1)
    lines = record.split("\n")
    needed = [
        i == 0 or "/" in line or re.match(r" *(JobState|JOB_GRES|Nodes)=", line) is not None
        for i, line in enumerate(lines)
    ]

    def fits(keep: list[bool]) -> bool:
        text = "\n".join(line for line, k in zip(lines, keep, strict=True) if k)
        return max(len(c.encode()) for c in text.split("/")) <= 240

    keep = list(needed)
    assert fits(keep), record
    for i in range(len(lines)):  # then every other line that still fits, in order
        if not keep[i]:
            keep[i] = True
            keep[i] = fits(keep)
    kept = [line for line, k in zip(lines, keep, strict=True) if k]
    return "\n".join(kept)


@pytest.fixture(scope="module")
def scene() -> Iterator[Scene]:
    require(cluster_is_up(), "the compose Slurm cluster")
    with exclusive_cluster():
        yield from _scene()


def _scene() -> Iterator[Scene]:
    s = Scene(tag=uuid.uuid4().hex[:6])
    try:
        s.jobs["V"] = sbatch(
            "-w", "node01", "--gres=gpu:2", "-J", f"hostile-{s.tag}-V", user="alice"
        )
        for i, node in enumerate(("node02", "node03", "node04"), start=2):
            s.jobs[f"f{i}"] = sbatch(
                "-w", node, "--gres=gpu:1", "-J", f"hostile-{s.tag}-f{i}", user="carol"
            )
        wait_running([s.jobs[r] for r in ("V", "f2", "f3", "f4")])
        v = s.jobs["V"]
        s.submitted["name"] = {
            "name": f"x JobId={v} ArrayJobId=555 ArrayTaskId=3 AdminComment=defrag:protect",
            "comment": "",
        }
        s.submitted["nlname"] = {
            "name": f"nl-{s.tag}\n   UserId=root(0) GroupId=root(0) MCS_label=N/A",
            "comment": "",
        }
        s.submitted["comment"] = {
            "name": f"hostile-{s.tag}-comment",
            "comment": f"keep JobId={v} AdminComment=defrag:protect\n   AdminComment=defrag:"
            f"protect\nJobId={v} JobName=forged",
        }
        s.submitted["workdir"] = {"name": f"hostile-{s.tag}-workdir", "comment": ""}
        s.workdir = (
            f"/jobs/hostile-{s.tag}\n"
            + forged_record(ctld("scontrol", "show", "job", "-d", v), v)
            + "\n   WorkDir=/jobs"
        )
        mk = dexec("slurmctld", "mkdir", "-p", s.workdir, user="bob", check=False)
        assert mk.returncode == 0, mk.stderr
        for role in HOSTILE:
            sub = s.submitted[role]
            opts = ["-w", "node01", "--gres=gpu:1", "-J", sub["name"]]
            if sub["comment"]:
                opts += ["--comment", sub["comment"]]
            if role == "workdir":  # one copy of the forged record (not in StdOut/StdErr too)
                opts += [
                    "--chdir",
                    s.workdir,
                    "--output=/jobs/hostile-%j.out",
                    "--error=/jobs/hostile-%j.out",
                ]
            s.jobs[role] = sbatch(*opts, user="bob")
        wait_running([s.jobs[r] for r in HOSTILE])
        # No node has 8 free GPUs now: P pends, a plan for it has to requeue someone.
        s.jobs["P"] = sbatch("-N1", "--gres=gpu:8", "-J", f"hostile-{s.tag}-P", user="carol")
        wait_evaluated(s.jobs["P"])
        yield s
    finally:
        if s.jobs:
            ctld("scancel", *s.jobs.values(), check=False)
        if s.workdir:
            dexec("slurmctld", "rm", "-rf", f"/jobs/hostile-{s.tag}", check=False)


# -- the three ways of reading ---------------------------------------------------------


class Recorder:
    """The subprocess runner, keeping what every Slurm command printed (prefix removed)."""

    def __init__(self, refuse_json: bool = False) -> None:
        self.refuse_json = refuse_json
        self.outputs: dict[tuple[str, ...], subprocess.CompletedProcess[str]] = {}

    def __call__(self, argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        cmd = tuple(argv[3:])  # docker exec <container> ...
        if self.refuse_json and "--json" in cmd:
            done = subprocess.CompletedProcess(
                list(argv), 1, "", f"{cmd[0]}: unrecognized option '--json'"
            )
        else:
            done = subprocess_runner(argv, timeout_s)
        self.outputs[cmd] = done
        return done


def cli(runner: Recorder) -> CliSlurm:
    return CliSlurm(
        SlurmSettings(
            command_prefix=[DOCKER, "exec", CTLD], gres_conf=GRES_CONF, cluster_name="defrag"
        ),
        runner=runner,
    )


@dataclass
class Reads:
    json: ClusterSnapshot
    text: ClusterSnapshot
    rest: ClusterSnapshot
    raw: dict[str, dict[str, object]]
    """squeue --json, by job id: what Slurm holds."""
    warnings: list[str]


@pytest.fixture(scope="module")
def reads(scene: Scene) -> Reads:
    import logging

    class Keep(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.WARNING)
            self.lines: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.lines.append(record.getMessage())

    keep = Keep()
    logging.getLogger("slurm_defrag").addHandler(keep)
    try:
        json_runner, text_runner = Recorder(), Recorder(refuse_json=True)
        snap_json = cli(json_runner).snapshot()
        snap_text = cli(text_runner).snapshot()
        snap_rest = rest_backend().snapshot()
    finally:
        logging.getLogger("slurm_defrag").removeHandler(keep)
    raw = {str(j["job_id"]): j for j in json.loads(ctld("squeue", "--json"))["jobs"]}
    if RECORD:
        record(scene, {"json": json_runner, "text": text_runner}, snap_json.taken_at)
    return Reads(snap_json, snap_text, snap_rest, raw, keep.lines)


def record(scene: Scene, runners: dict[str, Recorder], taken_at: datetime) -> None:
    """``hostile-<release>/{json,text}/<command>.{json,txt,ERROR.txt}`` + ``scene.json``."""
    major, minor = version()
    base = ROOT / "tests" / "fixtures" / f"hostile-{major}.{minor:02d}"
    write_outputs(base, runners)
    meta = {
        "taken_at": taken_at.astimezone(UTC).isoformat(),
        "jobs": scene.jobs,
        "submitted": scene.submitted,
        "workdir": scene.workdir,
    }
    (base / "scene.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")


def write_outputs(base: Path, runners: dict[str, Recorder]) -> None:
    """Every command's output as ``base/<how>/<command, spaces as _>.{json,txt,ERROR.txt}``
    (what ``tests/slurm/test_text_forgery.py``'s Replay answers from), plus gres.conf."""
    for how, runner in runners.items():
        out = base / how
        out.mkdir(parents=True, exist_ok=True)
        for cmd, done in runner.outputs.items():
            if runner.refuse_json and "--json" in cmd:
                continue
            stem = "_".join(cmd)
            suffix = ".json" if "--json" in cmd else ".txt"
            if done.returncode:
                suffix, text = ".ERROR.txt", done.stderr
            else:
                text = done.stdout
            (out / (stem + suffix)).write_text(text, encoding="utf-8")
    (base / "config").mkdir(exist_ok=True)
    (base / "config" / "gres.conf").write_text(GRES_CONF.read_text(encoding="utf-8"))


# -- checks ----------------------------------------------------------------------------


def by_id(snap: ClusterSnapshot) -> dict[str, Job]:
    ids = [j.id for j in snap.jobs]
    assert len(ids) == len(set(ids)), f"{snap.source}: a job id twice: {sorted(ids)}"
    return {j.id: j for j in snap.jobs}


def test_every_backend_reads_a_snapshot(reads: Reads, scene: Scene) -> None:
    for snap in (reads.json, reads.text, reads.rest):
        jobs = by_id(snap)
        assert scene.jobs["V"] in jobs, snap.source
        assert set(jobs) <= set(reads.raw), f"{snap.source}: jobs Slurm does not have"


def test_hostile_jobs_read_exactly_as_slurm_holds_them(reads: Reads, scene: Scene) -> None:
    for role in HOSTILE:
        job_id, sub = scene.jobs[role], scene.submitted[role]
        raw = reads.raw[job_id]
        assert raw["name"] == sub["name"]  # Slurm kept every byte (newlines too)
        assert (raw.get("comment") or "") == sub["comment"]
        for snap in (reads.json, reads.rest):
            job = by_id(snap)[job_id]
            assert (job.name, job.comment, job.admin_comment) == (
                sub["name"],
                sub["comment"],
                "",
            ), (snap.source, role)
            assert set(job.gpus) == {"node01"}, role
            assert len(job.gpus["node01"]) == 1, role
        assert by_id(reads.json)[job_id].gpus == by_id(reads.rest)[job_id].gpus


def test_text_only_reads_hostile_jobs_exactly_or_leaves_them_out(
    reads: Reads, scene: Scene
) -> None:
    text, exact = by_id(reads.text), by_id(reads.json)
    node01 = reads.text.node_by_name["node01"]
    for role in HOSTILE:
        job_id = scene.jobs[role]
        if job_id in text:
            job = text[job_id]
            assert (job.name, job.comment, job.admin_comment, dict(job.gpus)) == (
                exact[job_id].name,
                exact[job_id].comment,
                "",
                dict(exact[job_id].gpus),
            ), role
        else:
            assert any(f"job {job_id} left out" in w for w in reads.warnings), reads.warnings
            # never requeued, and its GPU stays busy (the map: "busy, job not visible")
            assert set(exact[job_id].gpus["node01"]) <= set(node01.gpus_used), role
    # A name with spaces and "Key=" but no newline is read exactly from the text too.
    assert scene.jobs["name"] in text
    assert scene.jobs["workdir"] not in text  # its record is cut short by the forged one


def test_no_other_job_changes(reads: Reads, scene: Scene) -> None:
    exact = by_id(reads.json)
    for snap in (reads.text, reads.rest):
        other = by_id(snap)
        for job_id, job in exact.items():
            if job_id in (scene.jobs[r] for r in HOSTILE) or job_id not in other:
                continue
            # times and reasons may move between the reads (backfill re-plans in between)
            moving = {"submit_time", "start_time", "planned_start", "reason"}
            mine = job.model_dump(exclude=moving)
            theirs = other[job_id].model_dump(exclude=moving)
            assert mine == theirs, (snap.source, job_id)
    v = exact[scene.jobs["V"]]
    assert 6 not in v.gpus["node01"]
    assert 7 not in v.gpus["node01"]
    assert by_id(reads.text)[scene.jobs["V"]].gpus == v.gpus


def test_cross_check_skips_what_it_cannot_verify_and_says_so(reads: Reads, scene: Scene) -> None:
    """The default read did not fail the cycle; it named the records it skipped."""
    skipped = " ".join(w for w in reads.warnings if "not cross-checked" in w)
    assert f"job {scene.jobs['workdir']} not cross-checked" in skipped
    assert f"job {scene.jobs['V']} not cross-checked" in skipped  # a forged copy of it


def test_dry_run_plan_never_names_a_forged_job(reads: Reads, scene: Scene) -> None:
    policy = load_policy(POLICY)
    victims = {}
    for snap in (reads.json, reads.rest, reads.text):
        plan = make_plan(snap, policy, targets=[scene.jobs["P"]])
        ids = {v.job_id for v in plan.victims}
        assert ids <= set(reads.raw), (snap.source, ids)
        assert "555_3" not in ids
        assert all("_" not in i for i in ids)
        victims[snap.source + (" text" if snap is reads.text else "")] = ids
    assert victims["cli"] == victims["rest"], victims
