"""A record cannot be forged from inside a value; ids are checked before argv (#15).

Replays what real Slurm printed with hostile jobs in the queue
(``tests/fixtures/hostile-<release>/``, recorded by ``tests/e2e/test_hostile_live.py``
with ``SLURM_DEFRAG_RECORD=1``; ``scene.json`` says which job is which and what it was
submitted with): bob's jobs ``name`` (``-J 'x JobId=<V> ArrayJobId=555 ArrayTaskId=3
AdminComment=defrag:protect'``), ``nlname`` (a newline and a forged ``UserId=`` line in
the name), ``comment`` (forged keys, a newline, a forged ``JobId=<V>`` line) and
``workdir`` (a directory name with a newline and a whole forged record of alice's job V
with GPU indices 6-7), next to V, three fillers and a pending 8-GPU job P.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from slurm_defrag.domain.cluster import Job
from slurm_defrag.slurm import ids
from slurm_defrag.slurm.cli_backend import CliSlurm
from slurm_defrag.slurm.connection import SlurmSettings
from slurm_defrag.slurm.failures import SlurmParseError, SlurmRejectedError
from slurm_defrag.slurm.fake import FakeSlurm
from slurm_defrag.slurm.parse import scontrol_text
from slurm_defrag.slurm.port import NewReservation
from slurm_defrag.slurm.rest import RestSlurm

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RELEASES = sorted(p.name.removeprefix("hostile-") for p in FIXTURES.glob("hostile-*"))
TEXT_ONLY = {
    "squeue --json": (1, "", "squeue: unrecognized option '--json'"),
    "sinfo --json": (1, "", "sinfo: unrecognized option '--json'"),
    "scontrol show nodes --json": (1, "", "scontrol: unrecognized option '--json'"),
    "scontrol show partitions --json": (1, "", "scontrol: unrecognized option '--json'"),
    "scontrol show reservations --json": (1, "", "scontrol: unrecognized option '--json'"),
}


TREE_CONFIG = "TopologyParam           = (null)\nTopologyPlugin          = topology/tree\n"
"""The topology lines of ``scontrol show config`` on the compose cluster (docker/slurm)."""


class Scene:
    def __init__(self, release: str) -> None:
        self.dir = FIXTURES / f"hostile-{release}"
        meta = json.loads((self.dir / "scene.json").read_text(encoding="utf-8"))
        self.jobs: dict[str, str] = meta["jobs"]
        self.submitted: dict[str, dict[str, str]] = meta["submitted"]
        self.taken_at = datetime.fromisoformat(meta["taken_at"])

    def text(self, how: str, name: str) -> str:
        return (self.dir / how / name).read_text(encoding="utf-8")


class Replay:
    """A runner answering from ``hostile-<release>/<how>/``; ``overrides`` as in conftest."""

    def __init__(self, scene: Scene, how: str, overrides: dict[str, Any] | None = None) -> None:
        self.dir = scene.dir / how
        self.overrides = overrides or {}
        self.calls: list[str] = []

    def __call__(self, argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        line = " ".join(argv)
        self.calls.append(line)
        if line in self.overrides:
            v = self.overrides[line]
            rc, out, err = v if isinstance(v, tuple) else (0, v, "")
            return subprocess.CompletedProcess(list(argv), rc, out, err)
        if line == "scontrol show config":  # recorded on the compose cluster: topology/tree
            return subprocess.CompletedProcess(list(argv), 0, TREE_CONFIG, "")
        stem = "_".join(argv)
        for suffix, rc in ((".json", 0), (".txt", 0), (".ERROR.txt", 1)):
            path = self.dir / (stem + suffix)
            if path.exists():
                text = path.read_text(encoding="utf-8")
                return subprocess.CompletedProcess(
                    list(argv), rc, "" if rc else text, text if rc else ""
                )
        raise AssertionError(f"no recording for {line!r}")


def cli(scene: Scene, runner: Replay) -> CliSlurm:
    settings = SlurmSettings(gres_conf=scene.dir / "config" / "gres.conf", cluster_name="defrag")
    return CliSlurm(settings, runner=runner, clock=lambda: scene.taken_at)


@pytest.fixture(params=RELEASES)
def scene(request: pytest.FixtureRequest) -> Scene:
    return Scene(request.param)


def by_id(jobs: Sequence[Job]) -> dict[str, Job]:
    found = [j.id for j in jobs]
    assert len(found) == len(set(found)), sorted(found)
    return {j.id: j for j in jobs}


def record_of(records: Sequence[scontrol_text.JobRecord], job_id: str) -> list[Any]:
    return [r for r in records if r.job_id == job_id]


# -- defect 1: JobName= is unquoted at the end of the first line -----------------------


def test_keys_in_a_job_name_stay_in_the_name(scene: Scene) -> None:
    """Defect 1: parse_line() read every Key= token, so ``-J 'x JobId=<V> ArrayJobId=555
    ArrayTaskId=3 AdminComment=defrag:protect'`` made the record's id ``555_3`` and gave it
    an admin comment. JobName is the rest of the first line."""
    job_id = scene.jobs["name"]
    (r,) = record_of(
        scontrol_text.job_records(scene.text("json", "scontrol_show_job_-d.txt")), job_id
    )
    assert r.problems == []
    assert r.fields["JobName"] == scene.submitted["name"]["name"]
    assert "AdminComment" not in r.fields
    assert "ArrayJobId" not in r.fields
    assert scontrol_text.display_id(r, "w", "p") == job_id
    job = scontrol_text.job_from_record(r, "w", "p")
    assert job is not None
    assert (job.id, job.admin_comment) == (job_id, "")


def test_default_read_with_hostile_jobs_succeeds_and_reads_them_exactly(
    scene: Scene, caplog: pytest.LogCaptureFixture
) -> None:
    """Defect 1/2 (cross-check): one running job with forged fields or records made every
    cycle fail (cross_check raised SlurmParseError on the forged GPU indices). Records that
    cannot be verified are skipped with a warning naming the job."""
    with caplog.at_level(logging.WARNING):
        snap = cli(scene, Replay(scene, "json")).snapshot()
    jobs = by_id(snap.jobs)
    for role in ("name", "nlname", "comment", "workdir"):
        sub, job = scene.submitted[role], jobs[scene.jobs[role]]
        assert (job.name, job.comment, job.admin_comment) == (sub["name"], sub["comment"], "")
    v = jobs[scene.jobs["V"]]
    assert not {6, 7} & set(v.gpus["node01"])
    skipped = caplog.text
    assert f"job {scene.jobs['workdir']} not cross-checked" in skipped
    assert f"job {scene.jobs['V']} not cross-checked: JobId={scene.jobs['V']} starts" in skipped


def test_cross_check_still_fails_on_a_real_disagreement(scene: Scene) -> None:
    """A verifiable record (no problems, same strings as the JSON) that disagrees on its GPU
    indices is an adapter or Slurm bug: the snapshot is refused, as before."""
    text = scene.text("json", "scontrol_show_job_-d.txt")
    f2 = scene.jobs["f2"]
    start = text.index(f"JobId={f2} JobName=")
    end = text.index("\n\n", start)
    bad = text[:start] + re.sub(r"\(IDX:\d+\)", "(IDX:5)", text[start:end], count=1) + text[end:]
    runner = Replay(scene, "json", {"scontrol show job -d": bad})
    with pytest.raises(SlurmParseError, match=rf"job {f2}: GPU indices .* disagree"):
        cli(scene, runner).snapshot()


def test_cross_check_compares_a_comment_with_a_newline_that_reads_exactly(
    scene: Scene, caplog: pytest.LogCaptureFixture
) -> None:
    """Defect 2: a newline in a comment followed by an out-of-order ``AdminComment=`` line
    is part of the comment (Slurm prints AdminComment before Comment); the record stays
    verifiable and is compared."""
    text = scene.text("json", "scontrol_show_job_-d.txt")
    f3 = scene.jobs["f3"]
    start = text.index(f"JobId={f3} JobName=")
    value = "c JobId=1 AdminComment=x\n   AdminComment=defrag:protect"
    at = text.index("\n   StdErr=", start)
    edited = text[:at] + f"\n   Comment={value} " + text[at:]
    records = scontrol_text.job_records(edited)
    (r,) = record_of(records, f3)
    assert r.problems == []
    assert r.continued
    assert r.fields["Comment"] == value
    assert "AdminComment" not in r.fields
    jobs = by_id(cli(scene, Replay(scene, "json")).snapshot().jobs)
    job = jobs[f3].model_copy(update={"comment": value})
    from slurm_defrag.slurm.cli_backend import cross_check

    with caplog.at_level(logging.WARNING):
        cross_check([job], records)
    assert f"job {f3} not cross-checked" not in caplog.text
    with pytest.raises(SlurmParseError, match=rf"job {f3}: GPU indices"):
        cross_check([job.model_copy(update={"gpus": {"node03": frozenset({7})}})], records)


# -- defect 2: newlines inject lines and whole records (text fallback) -----------------


def test_text_only_read_never_lets_a_forged_record_change_another_job(
    scene: Scene, caplog: pytest.LogCaptureFixture
) -> None:
    """Defect 2 (fallback): the work directory's forged ``JobId=<V>`` record (GPUs 6-7)
    replaced alice's job, and its requeue would have hit the id the user chose. Now V is
    read from its own re-read record; the hostile jobs that cannot be read unambiguously are
    left out with a warning (never requeued; their GPUs stay busy on the node)."""
    runner = Replay(scene, "text", TEXT_ONLY)
    with caplog.at_level(logging.WARNING):
        snap = cli(scene, runner).snapshot()
    jobs = by_id(snap.jobs)
    exact = by_id(cli(scene, Replay(scene, "json")).snapshot().jobs)
    v = scene.jobs["V"]
    assert jobs[v].gpus == exact[v].gpus
    assert jobs[v].name == exact[v].name
    assert set(jobs) <= set(exact)
    name = scene.jobs["name"]
    assert jobs[name].name == scene.submitted["name"]["name"]
    node01 = snap.node_by_name["node01"]
    for role in ("nlname", "comment", "workdir"):
        job_id = scene.jobs[role]
        assert job_id not in jobs
        assert f"job {job_id} left out" in caplog.text
        assert set(exact[job_id].gpus["node01"]) <= set(node01.gpus_used)
    for job_id, job in jobs.items():
        if job_id != name:
            assert job.model_dump() == exact[job_id].model_dump(), job_id
    # every re-read id came from squeue's list, and was validated first
    reread = [
        c for c in runner.calls if c.startswith("scontrol show job -d ") and c.split()[-1].isdigit()
    ]
    assert reread
    assert all(ids.job_id(c.split()[-1]) for c in reread)


def test_newline_forging_an_absent_admin_comment_is_caught_by_the_one_line_form(
    scene: Scene,
) -> None:
    """Defect 2: ``--chdir $'/x\\n   AdminComment=defrag:protect'`` on a job without an admin
    comment prints exactly like a real admin comment in the multi-line text (the structure
    cannot tell); ``-o`` prints the record on two lines, so it is not trusted."""
    how = "text"
    text, one = (
        scene.text(how, "scontrol_show_job_-d.txt"),
        scene.text(how, "scontrol_show_job_-d_-o.txt"),
    )
    f4 = scene.jobs["f4"]
    forged = "/x\n   AdminComment=defrag:protect"
    start = text.index(f"JobId={f4} JobName=")
    at = text.index("   WorkDir=", start)
    end = text.index("\n", at)
    text = text[:at] + f"   WorkDir={forged}" + text[end:]
    o_start = one.index(f"JobId={f4} JobName=")
    o_at = one.index(" WorkDir=", o_start)
    o_end = one.index(" StdErr=", o_at)
    one = one[:o_at] + f" WorkDir={forged}" + one[o_end:]
    records = scontrol_text.job_records(text)
    (r,) = record_of(records, f4)
    assert r.problems == []
    assert r.fields["AdminComment"] == "defrag:protect"
    scontrol_text.check_one_liners(records, one)
    assert r.problems
    assert "line break" in r.problems[0]


def test_a_made_up_job_id_is_never_reread(scene: Scene) -> None:
    """Id lists come from squeue's numbers, not from the text: a forged record of a job that
    does not exist is dropped without a command naming its id."""
    text = scene.text("text", "scontrol_show_job_-d.txt")
    f2 = scene.jobs["f2"]
    start = text.index(f"JobId={f2} JobName=")
    end = text.index("\n\n", start) + 2
    made_up = text[start:end].replace(f"JobId={f2} ", "JobId=4000000 ", 1)
    runner = Replay(scene, "text", {**TEXT_ONLY, "scontrol show job -d": text + made_up})
    jobs = by_id(cli(scene, runner).snapshot().jobs)
    assert "4000000" not in jobs
    assert not any("4000000" in c for c in runner.calls)


# -- defect 3: ids reach argv unchecked -----------------------------------------------

BAD_JOB_IDS = [
    "8,1",
    "8 1",
    "8\n1",
    "",
    "0",
    "-1",
    "12_[1-3]",
    "12.batch",
    "²",
    "٣",
    "JobId=1",
    "1" * 11,
]
BAD_NAMES = ["node01,node02", "node[01-02]", "a b", "a=b", "", "x\n", "../x", "n?x", "é"]


def test_job_ids_of_one_job_are_accepted() -> None:
    assert [ids.job_id(v) for v in ("123", "120_3", "120_0", "200+1")] == [
        "123",
        "120_3",
        "120_0",
        "200+1",
    ]
    assert ids.numeric_job_id("4294967294") == 4294967294


@pytest.mark.parametrize("bad", BAD_JOB_IDS)
def test_cli_writer_refuses_a_job_id_that_is_not_one_job(bad: str) -> None:
    """Defect 3: a job id ``8,1`` from Slurm output requeued two jobs (scontrol requeue
    takes a comma-separated list); nothing reaches argv now."""
    calls: list[Sequence[str]] = []

    def runner(argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(list(argv), 0, "", "")

    backend = CliSlurm(SlurmSettings(), runner=runner)
    with pytest.raises(SlurmRejectedError, match=r"refused job id"):
        backend.requeue(bad, "r")
    with pytest.raises(SlurmRejectedError, match=r"refused job id"):
        backend.update_job(bad, Comment="x")
    assert calls == []


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_cli_writer_refuses_node_and_reservation_names(bad: str) -> None:
    """Defect 3: node and reservation names go to argv as ``NodeName=``/``Nodes=``/
    ``ReservationName=``; a ',' or '[' there addresses other nodes."""
    calls: list[Sequence[str]] = []

    def runner(argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(list(argv), 0, "", "")

    backend = CliSlurm(SlurmSettings(), runner=runner)
    with pytest.raises(SlurmRejectedError, match=r"refused node name"):
        backend.update_node(bad, State="DRAIN")
    with pytest.raises(SlurmRejectedError, match=r"refused node name|no nodes"):
        backend.create_reservation(NewReservation("r1", [bad], 60))
    with pytest.raises(SlurmRejectedError, match=r"refused reservation name"):
        backend.create_reservation(NewReservation(bad, ["node01"], 60))
    with pytest.raises(SlurmRejectedError, match=r"refused reservation name"):
        backend.delete_reservation(bad)
    with pytest.raises(SlurmRejectedError, match=r"refused user"):
        backend.create_reservation(NewReservation("r1", ["node01"], 60, users=[bad or ","]))
    assert calls == []


@pytest.mark.parametrize("bad", ["8,1", "1/../../nodes", "1?x=y", "²"])
def test_rest_writer_refuses_ids_before_building_a_url(bad: str) -> None:
    """Defect 3 (rest): the job id and node name become part of the URL path."""

    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"request sent: {request.url}")

    client = httpx.Client(base_url="http://slurmrestd", transport=httpx.MockTransport(handler))
    backend = RestSlurm(SlurmSettings(backend="rest", rest_api_version="v0.0.42"), client=client)
    with pytest.raises(SlurmRejectedError, match=r"refused job id"):
        backend.update_job(bad, Comment="x")
    with pytest.raises(SlurmRejectedError, match=r"refused job id"):
        backend.requeue(bad, "r")
    with pytest.raises(SlurmRejectedError, match=r"refused node name"):
        backend.update_node(bad, State="DRAIN")
    with pytest.raises(SlurmRejectedError, match=r"refused reservation name"):
        backend.delete_reservation(bad)


@pytest.mark.parametrize("bad", ["8,1", "²", "12_[1-3]"])
def test_pyslurm_and_fake_writers_refuse_ids(bad: str, recordings: Any) -> None:
    """Defect 3 (pyslurm, fake): ``"²".isdigit()`` is True and ``int("²")`` a ValueError
    traceback; the fake refuses what the real writers refuse, so dry-run shows it."""
    backend = recordings.pyslurm("24.11")
    with pytest.raises(SlurmRejectedError, match=r"refused job id"):
        backend.requeue(bad, "r")
    with pytest.raises(SlurmRejectedError, match=r"refused job id"):
        backend.update_job(bad, Comment="x")
    with pytest.raises(SlurmRejectedError, match=r"refused node name"):
        backend.update_node("node01,node02", State="DRAIN")
    fake = FakeSlurm(recordings.cli("24.11").snapshot())
    with pytest.raises(SlurmRejectedError, match=r"refused job id"):
        fake.requeue(bad, "r")
    with pytest.raises(SlurmRejectedError, match=r"refused node name"):
        fake.create_reservation(NewReservation("r1", ["node01,node02"], 60))
    assert fake.calls == []


def test_rereads_are_bounded(
    scene: Scene, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Hostile jobs cannot make a text snapshot arbitrarily slow: beyond REREAD_MAX
    doubtful records per snapshot, jobs are left out (with the warning) unread."""
    from slurm_defrag.slurm import cli_backend as cli_module

    monkeypatch.setattr(cli_module, "REREAD_MAX", 0)
    runner = Replay(scene, "text", TEXT_ONLY)
    with caplog.at_level(logging.WARNING):
        jobs = by_id(cli(scene, runner).snapshot().jobs)
    assert not [
        c for c in runner.calls if c.startswith("scontrol show job -d ") and c.split()[-1].isdigit()
    ]
    assert scene.jobs["V"] not in jobs  # its record had a forged copy: doubtful, unread
    assert f"job {scene.jobs['V']} left out" in caplog.text


def test_plan_victims_are_real_jobs_and_the_same_from_json_and_text(scene: Scene) -> None:
    """Defect 1 (enforce with the text fallback requeued a job id the user chose): the
    dry-run plan for the pending 8-GPU job picks the same real victims either way."""
    from slurm_defrag.planner.facade import make_plan
    from slurm_defrag.policy.file import load_policy

    policy = load_policy(FIXTURES.parent.parent / "docker" / "defrag" / "policy.toml")
    victims = []
    for how, overrides in (("json", {}), ("text", TEXT_ONLY)):
        snap = cli(scene, Replay(scene, how, overrides)).snapshot()
        plan = make_plan(snap, policy, targets=[scene.jobs["P"]])
        victims.append({v.job_id for v in plan.victims})
    assert victims[0] == victims[1]
    assert victims[0]
    assert victims[0] <= set(scene.jobs.values()) - {scene.jobs[r] for r in ("P",)}


def test_cross_check_warns_once_per_job(scene: Scene, caplog: pytest.LogCaptureFixture) -> None:
    """Unverifiable records are skipped with one log line per job (V has forged copies)."""
    with caplog.at_level(logging.WARNING):
        cli(scene, Replay(scene, "json")).snapshot()
    assert caplog.text.count(f"job {scene.jobs['V']} not cross-checked") == 1


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_a_pending_array_with_a_task_list_does_not_fail_the_read(
    recordings: Any, version: str
) -> None:
    """A user's ``--array=1,3,5-7`` prints ``ArrayTaskId=1,3,5-7`` on the array's own
    record; reading it as one integer raised SlurmParseError for the whole snapshot (text
    fallback and cross-check alike). It is the job itself, as in the JSON."""
    head, array = "JobId=9 JobName=", "JobId=9 ArrayJobId=9 ArrayTaskId=1,3,5-7 JobName="
    text = recordings.text(version, "scontrol_show_job_-d.txt").replace(head, array)
    one = recordings.text(version, "scontrol_show_job_-d_-o.txt").replace(head, array)
    from test_contract import TEXT_ONLY as refused

    runner = recordings.ReplayRunner(
        version, {**refused, "scontrol show job -d": text, "scontrol show job -d -o": one}
    )
    jobs = by_id(recordings.cli(version, runner, cluster_name="fakegpu").snapshot().jobs)
    assert jobs["9"].state == "PENDING"
    runner = recordings.ReplayRunner(version, {"scontrol show job -d": text})
    assert "9" in by_id(recordings.cli(version, runner).snapshot().jobs)


@pytest.mark.parametrize("text", ["", "No jobs in the system\n", "\n\n"])
def test_no_job_record_at_all_reads_as_no_jobs(text: str) -> None:
    """Found by the fuzz tests: text without a single ``JobId=`` line raised ValueError."""
    assert scontrol_text.job_records(text) == []
