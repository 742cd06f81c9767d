"""Fuzz every parser of Slurm output: only a one-line DefragError, in bounded memory.

Issue #15 (hostile input): anything Slurm prints back may carry what a user typed, so the
scontrol text, the ``--json`` output of squeue/sinfo/scontrol (22.05 and 24.11 schemas),
slurmrestd's JSON (v0.0.38 and v0.0.42) and pyslurm's dicts are each fuzzed with
``FUZZ_EXAMPLES`` cases (10,000 under CI), starting from the real recordings
(:mod:`slurm_inputs`). The pure parse functions run at full count; the whole
``snapshot()`` of each backend (runner / transport / module replaced, parsing untouched)
runs at a fiftieth of it, since a snapshot reads every recorded command, and byte-level
damage to slurmrestd's answer at a fifth.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import cache
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from slurm_inputs import (
    FIXTURES,
    json_document,
    json_parts,
    mutated_json,
    mutated_text,
    random_text,
    recording,
    scontrol_text,
)

from fuzzing import FUZZ, FUZZ_EXAMPLES, assert_clean
from slurm_defrag.slurm.cli_backend import CliSlurm
from slurm_defrag.slurm.connection import SlurmSettings
from slurm_defrag.slurm.parse import openapi
from slurm_defrag.slurm.parse import scontrol_text as text_parser
from slurm_defrag.slurm.parse.mapping import Doc
from slurm_defrag.slurm.pyslurm_adapter import PyslurmSlurm, parts_from
from slurm_defrag.slurm.rest import RestSlurm

pytestmark = pytest.mark.slow  # 10,000 cases per parser under CI (tests/fuzzing.py)

NOW = datetime(2026, 11, 29, 15, 14, 13, tzinfo=UTC)
SNAPSHOT = settings(FUZZ, max_examples=max(FUZZ_EXAMPLES // 50, 20))
"""A whole snapshot reads every recorded command (~30 ms): 200 cases under CI."""
DECODER = settings(FUZZ, max_examples=max(FUZZ_EXAMPLES // 5, 60))
"""Byte damage probes json.loads's few failure modes: 2,000 cases under CI."""

# -- scontrol text ---------------------------------------------------------------------

TEXT_PARSERS: dict[str, Callable[[str], Any]] = {
    "job": lambda t: text_parser.jobs(t, "scontrol show job -d"),
    "node": lambda t: text_parser.nodes(t, "scontrol show node -d"),
    "partition": lambda t: text_parser.partitions(t, "scontrol show partition"),
    "reservation": lambda t: text_parser.reservations(t, "scontrol show reservation", NOW),
}
TEXT_RECORDINGS = {
    "job": ("scontrol_show_job_-d.txt", "scontrol_show_job_-d_-o.txt"),
    "node": ("scontrol_show_node_-d.txt", "scontrol_show_node_-d_-o.txt"),
    "partition": ("scontrol_show_partition.txt",),
    "reservation": ("scontrol_show_reservation.txt",),
}


def text_case(kind: str) -> st.SearchStrategy[str]:
    recorded = st.sampled_from(TEXT_RECORDINGS[kind]).flatmap(scontrol_text)
    return st.one_of(recorded, recorded, recorded, random_text)


@FUZZ
@given(text_case("job"))
def test_scontrol_text_jobs_fuzz(text: str) -> None:
    assert_clean(TEXT_PARSERS["job"], text)


@FUZZ
@given(text_case("node"))
def test_scontrol_text_nodes_fuzz(text: str) -> None:
    assert_clean(TEXT_PARSERS["node"], text)


@FUZZ
@given(
    st.sampled_from(["partition", "reservation"]).flatmap(
        lambda kind: st.tuples(st.just(kind), text_case(kind))
    )
)
def test_scontrol_text_partitions_reservations_fuzz(case: tuple[str, str]) -> None:
    kind, text = case
    assert_clean(TEXT_PARSERS[kind], text)


# -- OpenAPI JSON: cli --json and slurmrestd -------------------------------------------

# (version, recording, records key, mapping call): what each backend reads as JSON.
Mapper = Callable[[openapi.V0038, Doc], Any]
_JOBS: Mapper = lambda fam, doc: (fam.jobs(doc), fam.cluster(doc))  # noqa: E731
_NODES: Mapper = lambda fam, doc: fam.nodes(doc)  # noqa: E731
_PARTITIONS: Mapper = lambda fam, doc: fam.partitions(doc)  # noqa: E731
_RESERVATIONS: Mapper = lambda fam, doc: fam.reservations(doc, NOW)  # noqa: E731

CLI_JSON = (
    ("22.05", "squeue_--json.json", "jobs", _JOBS),
    ("22.05", "sinfo_--json.json", "nodes", _NODES),
    ("24.11", "squeue_--json.json", "jobs", _JOBS),
    ("24.11", "scontrol_show_nodes_--json.json", "nodes", _NODES),
    ("24.11", "scontrol_show_partitions_--json.json", "partitions", _PARTITIONS),
    ("24.11", "scontrol_show_reservations_--json.json", "reservations", _RESERVATIONS),
)
REST_JSON = tuple(
    (version, f"slurmrestd_GET_slurm_{api}_{endpoint}.json", endpoint, mapper)
    for version, api in (("22.05", "v0.0.38"), ("24.11", "v0.0.42"))
    for endpoint, mapper in (
        ("jobs", _JOBS),
        ("nodes", _NODES),
        ("partitions", _PARTITIONS),
        ("reservations", _RESERVATIONS),
    )
)


# One backend for the decoding tests: an httpx.Client costs ~30 ms to build (TLS context).
REST = RestSlurm(SlurmSettings(backend="rest"), client=httpx.Client(base_url="http://slurmrestd"))


def json_case(table: tuple[tuple[str, str, str, Mapper], ...]) -> st.SearchStrategy[Any]:
    return st.sampled_from(table).flatmap(
        lambda c: st.tuples(st.just(c), json_document(c[0], c[1], c[2]))
    )


def map_json(data: Any, where: str, mapper: Mapper) -> Any:
    """What the cli and rest backends do with a decoded answer."""
    openapi.check_errors(data, where)
    return mapper(openapi.family(data, where), Doc(data, where, ""))


@FUZZ
@given(json_case(CLI_JSON))
def test_cli_json_fuzz(case: tuple[tuple[str, str, str, Mapper], Any]) -> None:
    (_, name, _, mapper), data = case
    assert_clean(map_json, data, name.removesuffix(".json").replace("_", " "), mapper)


@FUZZ
@given(json_case(REST_JSON))
def test_rest_json_fuzz(case: tuple[tuple[str, str, str, Mapper], Any]) -> None:
    """Through RestSlurm's response decoding, as slurmrestd's bytes arrive."""
    (_, name, endpoint, mapper), data = case
    what = f"GET /slurm/{name.split('_')[3]}/{endpoint}"
    body = json.dumps(data).encode()

    def parse() -> Any:
        return map_json(REST._decode(httpx.Response(200, content=body), what), what, mapper)

    assert_clean(parse)


# Byte-level damage to a JSON answer: what json.loads itself trips over.
_RAW_DAMAGE = (
    b"1" * 5000,
    b"NaN",
    b"-Infinity",
    b"[" * 5000,
    b'{"a":' * 3000,
    b"\xff\xfe",
    b"\x00",
    b"1e999",
    b'"\\ud800"',
    b"",
)


@DECODER
@given(
    st.sampled_from(REST_JSON),
    st.sampled_from(_RAW_DAMAGE) | st.binary(max_size=20),
    st.floats(0, 1),
)
def test_rest_raw_json_fuzz(
    case: tuple[str, str, str, Mapper], damage: bytes, where_frac: float
) -> None:
    """Bytes spliced into slurmrestd's answer (huge integers, NaN, deep nesting, bad UTF-8)."""
    version, name, endpoint, mapper = case
    frame, records = json_parts(version, name, endpoint)
    body = (frame[:-1] + f', "{endpoint}": [' + records[0] + "]}").encode()
    at = int(where_frac * len(body))
    body = body[:at] + damage + body[at:]
    what = f"GET /slurm/x/{endpoint}"

    def parse() -> Any:
        return map_json(REST._decode(httpx.Response(200, content=body), what), what, mapper)

    assert_clean(parse)


# -- pyslurm dicts ---------------------------------------------------------------------


class StandIn:
    """A pyslurm object as far as the adapter uses it (as in tests/slurm/conftest.py)."""

    def __init__(self, data: Any, layout: Any = None) -> None:
        self._data, self._layout = data, layout

    def to_dict(self, recursive: bool = False) -> Any:
        return self._data

    def get_resource_layout_per_node(self) -> Any:
        return self._layout


PYSLURM = ("jobs", "nodes", "partitions", "reservations")


@cache
def pyslurm_records(kind: str) -> tuple[str, ...]:
    """The recorded dumps of one kind as JSON texts (jobs paired with their layout)."""
    data = json.loads(recording("24.11", f"pyslurm-24.11_{kind}.json"))
    layouts = json.loads(recording("24.11", "pyslurm-24.11_resource_layout_per_node.json"))
    if kind == "jobs":
        return tuple(json.dumps({"job": v, "layout": layouts.get(k)}) for k, v in data.items())
    return tuple(json.dumps(v) for v in data.values())


@st.composite
def pyslurm_case(draw: st.DrawFn) -> dict[str, list[StandIn]]:
    """1-2 recorded objects of one kind (jobs with their layouts), mutated."""
    kind = draw(st.sampled_from(PYSLURM))
    records = pyslurm_records(kind)
    picked = draw(st.lists(st.sampled_from(records), min_size=1, max_size=2))
    mutated = draw(mutated_json([json.loads(r) for r in picked]))
    if kind == "jobs":
        objects = [
            StandIn(p.get("job"), p.get("layout")) if isinstance(p, dict) else StandIn(p)
            for p in mutated
        ]
    else:
        objects = [StandIn(o) for o in mutated]
    out: dict[str, list[StandIn]] = {k: [] for k in PYSLURM}
    out[kind] = objects
    return out


@FUZZ
@given(pyslurm_case())
def test_pyslurm_dicts_fuzz(objects: dict[str, list[StandIn]]) -> None:
    assert_clean(
        parts_from,
        objects["nodes"],
        objects["jobs"],
        objects["partitions"],
        objects["reservations"],
        NOW,
    )


# -- whole snapshots (what the service calls) ------------------------------------------


def settings_for(version: str, **extra: Any) -> SlurmSettings:
    return SlurmSettings(gres_conf=FIXTURES / f"slurm-{version}" / "config" / "gres.conf", **extra)


class Runner:
    """Replays the recordings; ``bad`` replaces one command's stdout."""

    def __init__(self, version: str, bad: dict[str, str]) -> None:
        self.version, self.bad = version, bad

    def __call__(self, argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        line = " ".join(argv)
        if line in self.bad:
            return subprocess.CompletedProcess(argv, 0, self.bad[line], "")
        if line == "scontrol --version":
            return subprocess.CompletedProcess(argv, 0, f"slurm {self.version}.5\n", "")
        if line == "scontrol show config":  # not recorded: the recorded slurm.conf's plugin
            return subprocess.CompletedProcess(argv, 0, "TopologyPlugin = topology/tree\n", "")
        stem = "_".join(argv)
        for suffix, rc in ((".json", 0), (".txt", 0), (".ERROR.txt", 1)):
            path = FIXTURES / f"slurm-{self.version}" / (stem + suffix)
            if path.exists():
                text = recording(self.version, stem + suffix)
                return subprocess.CompletedProcess(argv, rc, "" if rc else text, text if rc else "")
        raise AssertionError(f"no recording for {line!r}")


# command -> (recording, records key) for JSON, or the text recording.
CLI_COMMANDS = {
    "22.05": {
        "squeue --json": ("squeue_--json.json", "jobs"),
        "sinfo --json": ("sinfo_--json.json", "nodes"),
        "scontrol show job -d": "scontrol_show_job_-d.txt",
        "scontrol show partition": "scontrol_show_partition.txt",
        "scontrol show reservation": "scontrol_show_reservation.txt",
    },
    "24.11": {
        "squeue --json": ("squeue_--json.json", "jobs"),
        "scontrol show nodes --json": ("scontrol_show_nodes_--json.json", "nodes"),
        "scontrol show partitions --json": ("scontrol_show_partitions_--json.json", "partitions"),
        "scontrol show reservations --json": (
            "scontrol_show_reservations_--json.json",
            "reservations",
        ),
        "scontrol show job -d": "scontrol_show_job_-d.txt",
    },
}


@st.composite
def cli_outputs(draw: st.DrawFn) -> tuple[str, dict[str, str]]:
    version = draw(st.sampled_from(sorted(CLI_COMMANDS)))
    command = draw(st.sampled_from(sorted(CLI_COMMANDS[version])))
    source = CLI_COMMANDS[version][command]
    if isinstance(source, str):
        out = draw(mutated_text(recording(version, source)))
    else:
        out = json.dumps(draw(json_document(version, *source)))
    return version, {command: out}


@SNAPSHOT
@given(cli_outputs())
def test_cli_snapshot_fuzz(case: tuple[str, dict[str, str]]) -> None:
    version, bad = case
    backend = CliSlurm(settings_for(version), runner=Runner(version, bad), clock=lambda: NOW)
    assert_clean(backend.snapshot)


@st.composite
def rest_answers(draw: st.DrawFn) -> tuple[str, str, bytes]:
    version, name, endpoint, _ = draw(st.sampled_from(REST_JSON))
    return version, endpoint, json.dumps(draw(json_document(version, name, endpoint))).encode()


@SNAPSHOT
@given(rest_answers())
def test_rest_snapshot_fuzz(case: tuple[str, str, bytes]) -> None:
    version, bad_endpoint, bad_body = case
    api = {"22.05": "v0.0.38", "24.11": "v0.0.42"}[version]

    def handler(request: httpx.Request) -> httpx.Response:
        endpoint = request.url.path.rsplit("/", 1)[1]
        if endpoint == "ping":
            return httpx.Response(200, json={"meta": {}, "errors": [], "pings": []})
        if endpoint == bad_endpoint:
            return httpx.Response(200, content=bad_body)
        name = f"slurmrestd_GET_slurm_{api}_{endpoint}.json"
        return httpx.Response(200, text=recording(version, name))

    client = httpx.Client(base_url="http://slurmrestd", transport=httpx.MockTransport(handler))
    backend = RestSlurm(
        settings_for(version, backend="rest", rest_api_version=api),
        client=client,
        clock=lambda: NOW,
    )
    assert_clean(backend.snapshot)


@SNAPSHOT
@given(pyslurm_case())
def test_pyslurm_snapshot_fuzz(objects: dict[str, list[StandIn]]) -> None:
    def load(kind: str) -> Callable[[], list[StandIn]]:
        if objects[kind]:
            return lambda: objects[kind]
        layouts = json.loads(recording("24.11", "pyslurm-24.11_resource_layout_per_node.json"))
        data = json.loads(recording("24.11", f"pyslurm-24.11_{kind}.json"))
        return lambda: [StandIn(v, layouts.get(k, {})) for k, v in data.items()]

    module = SimpleNamespace(
        Nodes=SimpleNamespace(load=load("nodes")),
        Jobs=SimpleNamespace(load=load("jobs")),
        Partitions=SimpleNamespace(load=load("partitions")),
        Reservations=SimpleNamespace(load=load("reservations")),
        RPCError=RuntimeError,
    )
    backend = PyslurmSlurm(
        settings_for("24.11", backend="pyslurm"), module=module, clock=lambda: NOW
    )
    assert_clean(backend.snapshot)
