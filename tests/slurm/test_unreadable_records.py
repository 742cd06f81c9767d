"""Issue #40: one job record a reader cannot understand costs that job, never the read.

Slurm 24.11 holds ``--gres=gpu:abc:xyz:1`` instead of refusing it, and strings such as
``gres/gpu:1,gres/shard:abc:xyz:1`` reach the readers in a job's TRES per node. Before the
fix each of them failed the whole snapshot (a SlurmParseError from ``gpu_ask``), so every
service cycle failed, for everyone. Each reader (cli JSON, cli text, rest, pyslurm) now
reads the recorded cluster with ONE job record changed and gives: the snapshot; that job
kept, ``unreadable`` set (naming the field), no request; every other job and every node
exactly as the unchanged read; one warning naming the job. A running job whose GPU
allocation does not read keeps its GPUs busy.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from slurm_recordings import (
    API,
    TAKEN_AT,
    StandIn,
    cli_backend,
    fixture_dir,
    pyslurm_backend,
    pyslurm_module,
    recorded_text,
    rest_backend,
    rest_transport,
    settings_for,
)
from slurm_recordings import ReplayRunner as Replay
from test_contract import TEXT_ONLY

from slurm_defrag.domain.cluster import UNKNOWN_OWNER, ClusterSnapshot, Job
from slurm_defrag.slurm.pyslurm_adapter import PyslurmSlurm

HOSTILE_REQUESTS = (
    "gres/gpu:1,gres/shard:abc:xyz:1",
    "gres/gpu:1,gres/mps:1:2:3",
    "gres/gpu:1,gres/foo:99999999999999999999",
    "gpu:abc:xyz:1",  # as sbatch --gres=gpu:abc:xyz:1 was typed (held by 24.11)
)

READERS = (
    "cli-22.05",
    "cli-24.11",
    "cli-26.05",
    "text-22.05",
    "text-24.11",
    "text-26.05",
    "rest-22.05",
    "rest-24.11",
    "rest-26.05",
    "pyslurm-24.11",
    "pyslurm-25.11",
)
PENDING = {"24.11": "10", "25.11": "9"}
"""The held 3-GPU job of each recording (25.11's pyslurm dumps number it 9)."""


@dataclass(frozen=True)
class Change:
    """One job record changed the same way in every spelling of it."""

    job_id: str
    json: Callable[[dict[str, Any]], None] = lambda record: None
    """Edits the job's JSON record (squeue --json, slurmrestd, pyslurm's to_dict())."""
    text: tuple[str, str] = ("", "")
    """(pattern, replacement) in the job's ``scontrol show job -d`` record (and its -o line)."""
    layout: dict[str, Any] | None = None
    """pyslurm: the job's get_resource_layout_per_node() instead of the recorded one."""


def pending_job(reader: str) -> str:
    return PENDING.get(reader.split("-")[1], "10")


def snapshot(reader: str, change: Change | None = None) -> ClusterSnapshot:
    kind, version = reader.split("-")
    read = {"cli": _cli, "text": _text, "rest": _rest, "pyslurm": _pyslurm}[kind]
    return read(version, change)


@cache
def unchanged(reader: str) -> ClusterSnapshot:
    return snapshot(reader)


def _edited_json(name: str, version: str, change: Change | None) -> str:
    doc = json.loads(recorded_text(version, name))
    if change is not None:
        for record in doc["jobs"]:
            if str(record["job_id"]) == change.job_id:
                change.json(record)
    return json.dumps(doc)


def _cli(version: str, change: Change | None) -> ClusterSnapshot:
    """squeue --json, cross-checked against the text (changed alike, as Slurm prints one
    state twice)."""
    overrides = {"squeue --json": _edited_json("squeue_--json.json", version, change)}
    if change is not None and change.text[0]:
        text = _edited_text("scontrol_show_job_-d.txt", version, change)
        overrides["scontrol show job -d"] = text
    return cli_backend(version, Replay(version, overrides)).snapshot()  # type: ignore[no-any-return]


def _rest(version: str, change: Change | None) -> ClusterSnapshot:
    name = f"slurmrestd_GET_slurm_{API[version]}_jobs.json"
    body = httpx.Response(200, content=_edited_json(name, version, change).encode())
    transport = rest_transport(version, {f"/slurm/{API[version]}/jobs": body})
    return rest_backend(version, transport).snapshot()  # type: ignore[no-any-return]


def _edited_text(name: str, version: str, change: Change | None) -> str:
    """The recording with ``change.text`` applied inside the job's record only (every
    record, multi-line or ``-o``, starts with ``JobId=``)."""
    text = recorded_text(version, name)
    if change is None:
        return text
    start = text.index(f"JobId={change.job_id} ")
    end = text.find("JobId=", start + 1)
    end = len(text) if end < 0 else end
    record, n = re.subn(change.text[0], change.text[1], text[start:end])
    assert n, f"{change.text[0]!r} not in job {change.job_id}'s record"
    return text[:start] + record + text[end:]


def _text(version: str, change: Change | None) -> ClusterSnapshot:
    """Slurm without JSON (``squeue --json`` refused): jobs from the text alone."""
    runner = Replay(
        version,
        {
            **TEXT_ONLY,
            "scontrol show job -d": _edited_text("scontrol_show_job_-d.txt", version, change),
            "scontrol show job -d -o": _edited_text("scontrol_show_job_-d_-o.txt", version, change),
        },
    )
    return cli_backend(version, runner, cluster_name="fakegpu").snapshot()  # type: ignore[no-any-return]


def _pyslurm(version: str, change: Change | None) -> ClusterSnapshot:
    if change is None:
        return pyslurm_backend(version).snapshot()
    d = fixture_dir(version)
    jobs = json.loads((d / f"pyslurm-{version}_jobs.json").read_text())
    layouts = json.loads((d / f"pyslurm-{version}_resource_layout_per_node.json").read_text())
    change.json(jobs[change.job_id])
    if change.layout is not None:
        layouts[change.job_id] = change.layout
    stand_ins = [StandIn(v, layouts.get(k)) for k, v in jobs.items()]
    module = pyslurm_module(version)
    module.Jobs = SimpleNamespace(load=lambda: stand_ins)
    settings = settings_for(version, backend="pyslurm")
    return PyslurmSlurm(settings, module=module, clock=lambda: TAKEN_AT[version]).snapshot()


def warnings_about(caplog: pytest.LogCaptureFixture, job_id: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "slurm_defrag.slurm.snapshot_assembly" and f"job {job_id} " in r.getMessage()
    ]


def others(snap: ClusterSnapshot, job_id: str) -> list[Job]:
    return [j for j in snap.jobs if j.id != job_id]


def tres_per_node(bad: str) -> Change:
    """A pending job's TRES per node replaced, in every spelling of the record."""

    def edit(record: dict[str, Any]) -> None:
        record["tres_per_node"] = bad  # pyslurm: read before the 24.11 gres_per_node

    return Change("", json=edit, text=(r"TresPerNode=\S+", f"TresPerNode={bad}"))


# -- a pending job's request --------------------------------------------------------------


@pytest.mark.parametrize("bad", HOSTILE_REQUESTS)
@pytest.mark.parametrize("reader", READERS)
def test_an_unparseable_request_costs_that_job_only(
    reader: str, bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    job_id = pending_job(reader)
    change = Change(job_id, json=tres_per_node(bad).json, text=tres_per_node(bad).text)
    before = unchanged(reader)
    with caplog.at_level(logging.WARNING):
        snap = snapshot(reader, change)
    job, was = snap.job_by_id[job_id], before.job_by_id[job_id]
    assert job.unreadable.startswith("gres_request: ")
    assert re.search(r"(tres_per_node|TresPerNode)", job.unreadable), job.unreadable
    assert job.request is None
    assert was.request is not None  # it asked for 3 GPUs before the change
    kept = ("id", "state", "user", "name", "partition", "account", "priority", "submit_time")
    assert {k: getattr(job, k) for k in kept} == {k: getattr(was, k) for k in kept}
    assert others(snap, job_id) == others(before, job_id)
    assert snap.nodes == before.nodes
    assert snap.free_masks == before.free_masks
    assert len(warnings_about(caplog, job_id)) == 1
    assert job_id not in {j.id for j in snap.pending_gpu_jobs()}


@pytest.mark.parametrize("reader", ["cli-24.11", "text-24.11", "rest-24.11", "pyslurm-24.11"])
def test_the_warning_escapes_what_the_user_typed(
    reader: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A request with a terminal escape and a newline: the reason and the warning stay one
    line, with the control characters shown escaped."""
    bad = "gres/gpu:1,gres/x\x1b[31m:\u202e:1"
    change = tres_per_node(bad)
    change = Change("10", json=change.json, text=change.text)
    with caplog.at_level(logging.WARNING):
        job = snapshot(reader, change).job_by_id["10"]
    (said,) = warnings_about(caplog, "10")
    for text in (job.unreadable, said):
        assert "\x1b" not in text
        assert "\u202e" not in text
        assert "\n" not in text
    assert "\\x1b" in job.unreadable


# -- a running job's GPU allocation ------------------------------------------------------


def bad_allocation(reader: str) -> Change:
    """Job 3 (node02, GPUs 0-1) with indices that do not read."""

    def edit(record: dict[str, Any]) -> None:
        record["gres_detail"] = ["gpu:a100:2(IDX:0-x)"]

    layout = {"node02": {"cpu_ids": "0", "gres": {"gpu:a100": {"count": 2, "indexes": "0-x"}}}}
    return Change(
        "3",
        json=edit,
        text=(re.escape("GRES=gpu:a100:2(IDX:0-1)"), "GRES=gpu:a100:2(IDX:0-x)"),
        layout=layout,
    )


@pytest.mark.parametrize("reader", READERS)
def test_a_running_job_with_an_unreadable_allocation_keeps_its_gpus_busy(
    reader: str, caplog: pytest.LogCaptureFixture
) -> None:
    before = unchanged(reader)
    with caplog.at_level(logging.WARNING):
        snap = snapshot(reader, bad_allocation(reader))
    job = snap.job_by_id["3"]
    assert job.unreadable.startswith("gpu_allocation: ")
    assert (job.state, job.gpus, job.request) == ("RUNNING", {}, None)
    assert before.job_by_id["3"].gpus == {"node02": frozenset({0, 1})}
    # GPUs 0 and 1 of node02 are still busy, now with no visible owner ("?")
    assert snap.gpu_owners["node02"][:2] == (UNKNOWN_OWNER, UNKNOWN_OWNER)
    assert not snap.free_masks["node02"] & 0b11
    assert others(snap, "3") == others(before, "3")
    if reader.startswith("pyslurm"):
        # pyslurm has no node-level view: every GPU of the job's node counts busy
        assert snap.node_by_name["node02"].gpus_used == frozenset(range(8))
        assert {n.name: n for n in snap.nodes if n.name != "node02"} == {
            n.name: n for n in before.nodes if n.name != "node02"
        }
    else:
        assert snap.nodes == before.nodes  # the nodes' GresUsed still says they are busy
        assert snap.free_masks == before.free_masks
    assert len(warnings_about(caplog, "3")) == 1


@pytest.mark.parametrize("reader", ["cli-24.11", "rest-22.05", "text-26.05", "pyslurm-25.11"])
def test_a_gpu_past_the_nodes_last_costs_that_job_only(reader: str) -> None:
    """An allocation that parses but names GPU 9 of an 8-GPU node failed the snapshot's own
    check (and, on pyslurm, the node); now the job pays, and its node's GPUs stay busy."""

    def edit(record: dict[str, Any]) -> None:
        record["gres_detail"] = ["gpu:a100:2(IDX:0,9)"]

    layout = {"node02": {"cpu_ids": "0", "gres": {"gpu:a100": {"count": 2, "indexes": "0,9"}}}}
    change = Change(
        "3",
        json=edit,
        text=(re.escape("GRES=gpu:a100:2(IDX:0-1)"), "GRES=gpu:a100:2(IDX:0,9)"),
        layout=layout,
    )
    snap = snapshot(reader, change)
    job = snap.job_by_id["3"]
    assert re.fullmatch(
        r"gpu_allocation: \w+: job 3: gpus\.'node02': GPU index 9 outside 0\.\.7", job.unreadable
    )
    assert not snap.free_masks["node02"] & 0b11
    assert others(snap, "3") == others(unchanged(reader), "3")


# -- records without an id or a state: left out ------------------------------------------


@pytest.mark.parametrize("reader", ["cli-22.05", "cli-24.11", "rest-26.05", "pyslurm-24.11"])
def test_a_job_state_no_reader_knows_leaves_the_record_out(
    reader: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A newer Slurm's state word (or junk): the record cannot be kept as a job. It is left
    out with its reason (counted by the service), and its GPUs (job 1: node01, 0-3) stay
    busy."""

    def edit(record: dict[str, Any]) -> None:
        key = "state" if reader.startswith("pyslurm") else "job_state"
        record[key] = ["SLEEPING"] if isinstance(record[key], list) else "SLEEPING"

    before = unchanged(reader)
    with caplog.at_level(logging.WARNING):
        snap = snapshot(reader, Change("1", json=edit))
    (reason,) = snap.left_out
    assert reason.startswith("state: ")
    assert reason.endswith("unknown job state 'SLEEPING' (job 1)")
    assert "1" not in snap.job_by_id
    assert list(snap.jobs) == others(before, "1")
    assert not snap.free_masks["node01"] & 0b1111
    assert snap.unreadable_parts() == {"state": 1}
    said = [r.getMessage() for r in caplog.records if "left out of the snapshot" in r.getMessage()]
    assert len(said) == 1


def test_a_record_that_is_no_object_is_left_out(recordings: SimpleNamespace) -> None:
    doc = json.loads(recorded_text("24.11", "squeue_--json.json"))
    doc["jobs"].insert(3, ["not", "a", "job"])
    runner = Replay("24.11", {"squeue --json": json.dumps(doc)})
    snap = cli_backend("24.11", runner).snapshot()
    assert snap.left_out == ("record: squeue --json: jobs[3]: expected an object, got list",)
    assert snap.jobs == unchanged("cli-24.11").jobs
    assert snap.unreadable_parts() == {"record": 1}


@pytest.mark.parametrize(
    ("jobs", "problem"),
    [
        ({"1": {"job_id": 1}}, "expected a list, got dict"),
        (None, "missing"),
        ("[]", "expected a list"),
    ],
)
def test_a_broken_document_still_fails_the_read(jobs: Any, problem: str) -> None:
    """Only a document whose structure is broken still fails: no list of jobs."""
    from slurm_defrag.slurm.failures import SlurmParseError

    doc = json.loads(recorded_text("24.11", "squeue_--json.json"))
    if jobs is None:
        del doc["jobs"]
    else:
        doc["jobs"] = jobs
    runner = Replay("24.11", {"squeue --json": json.dumps(doc)})
    with pytest.raises(SlurmParseError, match=rf"^squeue --json: jobs: {problem}"):
        cli_backend("24.11", runner).snapshot()


def test_an_unreadable_job_reads_the_same_from_every_reader() -> None:
    """The reason names each reader's own field, the rest of the job is the same."""
    bad = HOSTILE_REQUESTS[0]
    change = tres_per_node(bad)
    jobs = {
        reader: snapshot(reader, Change("10", json=change.json, text=change.text)).job_by_id["10"]
        for reader in ("cli-24.11", "text-24.11", "rest-24.11", "pyslurm-24.11")
    }
    parts = {reader: job.unreadable_part for reader, job in jobs.items()}
    assert set(parts.values()) == {"gres_request"}
    requests = {job.request for job in jobs.values()}
    assert requests == {None}


class _Unconvertible(StandIn):
    """A pyslurm 25.11 Job whose request pyslurm itself cannot convert: ``to_dict()`` and
    the request's properties raise (recorded live for ``--gres=gpu:abc:xyz:1``:
    ``ValueError: invalid literal for int() with base 10: 'xyz'`` from ``gres_per_node``)."""

    BROKEN = ("gres_per_node", "tres_per_node")

    def __getattribute__(self, name: str) -> Any:
        if name in _Unconvertible.BROKEN:
            raise ValueError("invalid literal for int() with base 10: 'xyz'")
        return super().__getattribute__(name)

    def to_dict(self, recursive: bool = False) -> dict[str, Any]:
        raise ValueError("invalid literal for int() with base 10: 'xyz'")


@pytest.mark.parametrize("version", ["24.11", "25.11"])
def test_a_job_pyslurm_itself_cannot_convert_costs_that_job_only(version: str) -> None:
    d = fixture_dir(version)
    jobs = json.loads((d / f"pyslurm-{version}_jobs.json").read_text())
    layouts = json.loads((d / f"pyslurm-{version}_resource_layout_per_node.json").read_text())
    odd = PENDING[version]
    stand_ins = [
        (_Unconvertible if k == odd else StandIn)(v, layouts.get(k)) for k, v in jobs.items()
    ]
    module = pyslurm_module(version)
    module.Jobs = SimpleNamespace(load=lambda: stand_ins)
    settings = settings_for(version, backend="pyslurm")
    snap = PyslurmSlurm(settings, module=module, clock=lambda: TAKEN_AT[version]).snapshot()
    job = snap.job_by_id[odd]
    assert job.unreadable, job
    assert job.unreadable.startswith("gres_request: ")
    assert "pyslurm could not convert" in job.unreadable
    assert job.request is None
    assert others(snap, odd) == others(unchanged(f"pyslurm-{version}"), odd)
