"""Differential fuzz of issue #40: one hostile job record changes nothing but itself.

For every recorded release format (squeue --json and slurmrestd of 22.05, 24.11 and 26.05,
``scontrol show job -d`` text of the three, pyslurm 24.11 and 25.11), ONE job record is
changed: one value anywhere in it replaced (wrong type, huge number, odd GRES string,
empty, Unicode, nested junk), deleted, retyped or spliced with hostile text. The read
must still give a snapshot, and every OTHER job must be exactly what the unchanged read
gave; the changed record is kept (whole, or ``unreadable`` and asking for nothing) or left
out, and no GPU looks free that was busy before (pyslurm: when the record did not read,
since its layouts are its only view of busy GPUs).

The one exception is a contradiction between two records, which no rule about one record
can settle: two records with one job id, or two running jobs on one GPU. Slurm assigns
both, no user can write them, and the read fails as before (the oracle expects exactly that).

Each example reads only what a record can change: the jobs (the whole list, so a record
that spills into its neighbours would be caught) and the snapshot assembled with the
recorded nodes, partitions and reservations parsed once. The cli cross-check against the
text is not run: a changed allocation that still reads disagrees with the text, and that
fails the read by design (tests/slurm/test_parse_errors.py).
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from slurm_inputs import GENERATED, HOSTILE_TOKENS, hostile_text, hostile_value
from slurm_recordings import (
    API,
    TAKEN_AT,
    cli_backend,
    fixture_dir,
    pyslurm_backend,
    recorded_text,
    rest_backend,
)
from slurm_recordings import ReplayRunner as Replay
from test_contract import TEXT_ONLY
from test_unreadable_records import HOSTILE_REQUESTS

from fuzzing import FUZZ
from slurm_defrag.domain.cluster import ClusterSnapshot, Job, Node
from slurm_defrag.slurm import snapshot_assembly as assembly
from slurm_defrag.slurm.cli_backend import CliSlurm
from slurm_defrag.slurm.connection import SlurmSettings
from slurm_defrag.slurm.failures import SlurmParseError
from slurm_defrag.slurm.parse import openapi
from slurm_defrag.slurm.parse.mapping import Doc
from slurm_defrag.slurm.parse.records import JobsRead
from slurm_defrag.slurm.pyslurm_adapter import parts_from

pytestmark = pytest.mark.slow  # FUZZ_EXAMPLES per format: 10,000 under CI (tests/fuzzing.py)

FORMATS = (
    "squeue-22.05",
    "squeue-24.11",
    "squeue-26.05",
    "rest-22.05",
    "rest-24.11",
    "rest-26.05",
    "text-22.05",
    "text-24.11",
    "text-26.05",
    "pyslurm-24.11",
    "pyslurm-25.11",
)


# -- what one example reads ------------------------------------------------------------


@dataclass
class Base:
    """One format's recording, parsed once, and the unchanged read to compare with."""

    kind: str
    version: str
    read: ClusterSnapshot
    """A whole snapshot of the backend: its nodes, partitions, reservations are reused."""
    records: list[Any] = field(default_factory=list)
    """JSON: the job records (shared, never changed: a changed one is a fresh copy)."""
    frame: dict[str, Any] = field(default_factory=dict)
    where: str = ""
    chunks: list[str] = field(default_factory=list)
    """text: each job's ``scontrol show job -d`` record and its ``-o`` line."""
    lines: list[str] = field(default_factory=list)
    layouts: list[Any] = field(default_factory=list)
    """pyslurm: each job's layout, beside ``records`` (its ``to_dict()``)."""
    texts: list[str] = field(default_factory=list)
    """JSON and pyslurm: each record as JSON text (an example parses a fresh copy)."""
    paths: list[list[tuple[Any, ...]]] = field(default_factory=list)
    """JSON and pyslurm: the key path of every value in each record (found once)."""
    ids: list[str] = field(default_factory=list)
    """The job id each record had in the unchanged read."""
    nodes: list[Node] = field(default_factory=list)
    """cli and rest: the recorded nodes, without their topology (no gres.conf is read per
    example: that is not what a job record can change)."""
    settings: SlurmSettings = field(default_factory=SlurmSettings)
    """Built once: a pydantic-settings object costs milliseconds."""

    def jobs(self, records: list[Any], chunks: list[str], lines: list[str]) -> Any:
        if self.kind in ("squeue", "rest"):
            doc = Doc({**self.frame, "jobs": records}, self.where, "")
            return openapi.family(doc.data, self.where).read_jobs(doc)
        if self.kind == "text":
            # the cli backend's text reader (squeue --json refused), without its other reads
            runner = _TextRunner(self.ids, chunks, lines)
            return CliSlurm(self.settings, runner=runner)._text_jobs()
        return parts_from(
            [_Obj(n) for n in _pyslurm_dump(self.version, "nodes").values()],
            [_Obj(d, lay) for d, lay in zip(records, self.layouts, strict=True)],
            [_Obj(p) for p in _pyslurm_dump(self.version, "partitions").values()],
            [_Obj(r) for r in _pyslurm_dump(self.version, "reservations").values()],
            TAKEN_AT[self.version],
        )

    def assemble(self, jobs: Any) -> ClusterSnapshot:
        if isinstance(jobs, JobsRead):
            s = self.read
            jobs = assembly.Parts(
                self.nodes, jobs.jobs, s.partitions, s.reservations, s.cluster, (), jobs.left_out
            )
        return assembly.assemble(
            jobs,
            source=self.read.source,
            taken_at=self.read.taken_at,
            settings=self.settings,
            where=self.kind,
        )


class _Obj:
    """A pyslurm object as far as the adapter uses it (tests/slurm/conftest.py's StandIn
    without the attributes, which the adapter does not read)."""

    def __init__(self, data: Any, layout: Any = None) -> None:
        self._data, self._layout = data, layout

    def to_dict(self) -> Any:
        return self._data

    def get_resource_layout_per_node(self) -> Any:
        return self._layout


@cache
def _pyslurm_dump(version: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (fixture_dir(version) / f"pyslurm-{version}_{name}.json").read_text()
    )
    return data


@cache
def base(fmt: str) -> Base:
    kind, version = fmt.split("-")
    if kind in ("squeue", "rest"):
        name = (
            "squeue_--json.json"
            if kind == "squeue"
            else f"slurmrestd_GET_slurm_{API[version]}_jobs.json"
        )
        frame = json.loads(recorded_text(version, name))
        records = frame.pop("jobs")
        where = "squeue --json" if kind == "squeue" else f"GET /slurm/{API[version]}/jobs"
        read = (cli_backend if kind == "squeue" else rest_backend)(version).snapshot()
        b = Base(kind, version, read, records, frame, where)
        b.ids = [str(r["job_id"]) for r in records]
    elif kind == "text":
        read = cli_backend(version, Replay(version, TEXT_ONLY), cluster_name="fakegpu").snapshot()
        chunks, lines = _text_records(version)
        ids = [c.split(" ", 1)[0].removeprefix("JobId=") for c in chunks]
        b = Base(kind, version, read, chunks=chunks, lines=lines, ids=ids)
    else:
        jobs = _pyslurm_dump(version, "jobs")
        layouts = _pyslurm_dump(version, "resource_layout_per_node")
        read = pyslurm_backend(version).snapshot()
        b = Base(kind, version, read, list(jobs.values()))
        b.layouts = [layouts.get(k) for k in jobs]
        b.ids = list(jobs)
    b.texts = [json.dumps(r) for r in b.records]
    b.paths = [_paths(r) for r in b.records]
    b.nodes = [
        Node.model_validate({**n.model_dump(), "topology": None, "topology_source": None})
        for n in read.nodes
    ]
    b.settings = SlurmSettings(cluster_name=read.cluster)
    # The unchanged read through the same path as every example: the reference.
    b.read = b.assemble(b.jobs(b.records, b.chunks, b.lines))
    assert b.read.jobs == read.jobs
    assert not b.read.left_out
    return b


# -- scontrol text: a runner answering from the (changed) records ----------------------


def _text_records(version: str) -> tuple[list[str], list[str]]:
    text = recorded_text(version, "scontrol_show_job_-d.txt")
    starts = [m.start() for m in re.finditer(r"^JobId=", text, re.MULTILINE)]
    chunks = [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]
    lines = recorded_text(version, "scontrol_show_job_-d_-o.txt").split("\n")
    return chunks, [line + "\n" for line in lines if line.startswith("JobId=")]


class _TextRunner:
    """Slurm as far as the text reader asks it: every job, one job, the job ids."""

    def __init__(self, ids: Sequence[str], chunks: Sequence[str], lines: Sequence[str]) -> None:
        # by the ids Slurm knows: a changed record still answers for its job
        self.by_id = dict(zip(ids, zip(chunks, lines, strict=True), strict=True))
        self.chunks, self.lines = chunks, lines

    def __call__(self, argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        args = list(argv)
        out = self._answer(args)
        return subprocess.CompletedProcess(args, 0, out, "")

    def _answer(self, args: list[str]) -> str:
        if args[:1] == ["squeue"]:
            return "".join(f"{i}\n" for i in self.by_id)
        rest = args[4:]  # after scontrol show job -d
        one_line = rest[:1] == ["-o"]
        if one_line:
            rest = rest[1:]
        if not rest:
            return "".join(self.lines if one_line else self.chunks)
        if rest[0] not in self.by_id:  # Slurm: "Invalid job id specified"
            return ""
        chunk, line = self.by_id[rest[0]]
        return line if one_line else chunk


# -- one change to one record ----------------------------------------------------------

_INDEX = st.integers(0, 2**16)
_VALUES = st.one_of(
    hostile_value,
    st.sampled_from(HOSTILE_REQUESTS),
    st.sampled_from(GENERATED),
    st.text(max_size=20),
)
_TEXT_VALUES = st.one_of(
    hostile_text,
    st.sampled_from(HOSTILE_REQUESTS),
    st.sampled_from(HOSTILE_TOKENS),
    st.text(max_size=20),
)
_RETYPE: tuple[Callable[[Any], Any], ...] = (
    lambda v: [v],
    lambda v: {"number": v},
    lambda v: {"set": True, "infinite": False, "number": v},
    lambda v: str(v),
    lambda v: None,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The key path of every value below ``value``: where one change can land."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    out = []
    for k, v in items:
        out.append((*prefix, k))
        if isinstance(v, dict | list):
            out += _paths(v, (*prefix, k))
    return out


def change_json(data: st.DataObject, record: Any, paths: Sequence[tuple[Any, ...]]) -> str:
    """One change somewhere in ``record`` (a fresh copy); what it did, for the failure."""
    *parents, key = paths[data.draw(_INDEX) % len(paths)]
    container = record
    for k in parents:
        container = container[k]
    how = data.draw(st.sampled_from(("replace", "replace", "replace", "delete", "retype", "edit")))
    if how == "delete":
        del container[key]
    elif how == "retype":
        container[key] = data.draw(st.sampled_from(_RETYPE))(container[key])
    elif how == "edit" and isinstance(container[key], str):
        s = container[key]
        at = data.draw(_INDEX) % (len(s) + 1)
        container[key] = s[:at] + data.draw(hostile_text) + s[at:]
    else:
        container[key] = data.draw(_VALUES)
    return f"{how} {key!r}"


_TOKEN = re.compile(r"(?:(?<=\s)|^)([A-Za-z][\w/:.]*)=(\S*)", re.MULTILINE)


def change_text(data: st.DataObject, chunk: str, line: str) -> tuple[str, str]:
    """One value of the record replaced, alike in its multi-line and -o spellings (the k-th
    ``Key=`` of both is the same field: -o joins the lines)."""
    ours, theirs = list(_TOKEN.finditer(chunk)), list(_TOKEN.finditer(line))
    k = data.draw(_INDEX) % len(ours)
    value = data.draw(_TEXT_VALUES)
    a, b = ours[k], theirs[k]
    return (
        chunk[: a.start(2)] + value + chunk[a.end(2) :],
        line[: b.start(2)] + value + line[b.end(2) :],
    )


# -- the oracle ------------------------------------------------------------------------


def contradiction(snapshot_jobs: Sequence[Job], nodes: Any) -> str | None:
    """What makes two records contradict each other, as the read says it, if anything."""
    jobs = assembly.placed(snapshot_jobs, nodes, "x")
    if any(n > 1 for n in Counter(j.id for j in jobs).values()):
        return "duplicate job"
    held: dict[tuple[str, int], str] = {}
    for j in jobs:
        if j.holds_gpus:
            for name, idx in j.gpus.items():
                for g in idx:
                    if held.setdefault((name, g), j.id) != j.id:
                        return "also held by job"
    return None


def check(b: Base, i: int, jobs: Any, what: str) -> None:
    kept = jobs.jobs
    nodes = {n.name: n for n in (jobs.nodes if hasattr(jobs, "nodes") else b.read.nodes)}
    clash = contradiction(kept, nodes)
    if clash is not None:
        with pytest.raises(SlurmParseError, match=clash):
            b.assemble(jobs)
        return
    snap = b.assemble(jobs)
    others = {j.id: j for j in b.read.jobs if j.id != b.ids[i]}
    got = {j.id: j for j in snap.jobs if j.id in others}
    assert got == others, what
    changed = [j for j in snap.jobs if j.id not in others]
    assert len(changed) + len(snap.left_out) <= 1, (what, changed, snap.left_out)
    unread = bool(snap.left_out) or any(j.unreadable for j in changed)
    if b.kind == "pyslurm":
        for n in snap.nodes:  # only which GPUs are busy may differ: the layouts say it
            was = b.read.node_by_name[n.name]
            assert n.model_dump(exclude={"gpus_used"}) == was.model_dump(exclude={"gpus_used"})
    if b.kind != "pyslurm" or unread:
        for name, free in snap.free_masks.items():
            assert not free & ~b.read.free_masks[name], (what, name)


# -- the tests -------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@FUZZ
@given(data=st.data())
def test_one_hostile_job_record_changes_nothing_else(fmt: str, data: st.DataObject) -> None:
    b = base(fmt)
    i = data.draw(_INDEX) % len(b.ids)
    records, chunks, lines = list(b.records), list(b.chunks), list(b.lines)
    if b.kind == "text":
        chunks[i], lines[i] = change_text(data, chunks[i], lines[i])
        what = f"text {chunks[i]!r}"
    elif b.kind == "pyslurm" and data.draw(st.integers(0, 4)) == 0:  # a fifth: its layout
        layouts = list(b.layouts)
        layouts[i] = copy.deepcopy(layouts[i]) or {}
        paths = _paths(layouts[i])
        what = "layout " + (change_json(data, layouts[i], paths) if paths else "empty")
        b = replace(b, layouts=layouts)
    else:
        records[i] = json.loads(b.texts[i])  # a fresh copy: cheaper than deepcopy
        what = change_json(data, records[i], b.paths[i])
    check(b, i, b.jobs(records, chunks, lines), f"job {b.ids[i]}: {what}")
