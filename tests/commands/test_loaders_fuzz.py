"""Fuzz the file loaders: snapshot files (JSON), policy files (TOML, YAML), service config.

Hostile input (issue 15): whatever a file holds, loading it either works or raises one
:class:`~slurm_defrag.errors.DefragError` line, in bounded memory (:func:`fuzzing.assert_clean`).

Two kinds of cases per loader:

* structure-aware: a real example (``examples/``, ``docker/defrag/``, ``contrib/``) parsed,
  then 1-4 mutations at random places of its tree — a value replaced by a hostile one (huge
  or negative numbers, NaN, control characters, naive or year-1 timestamps, wrong types,
  empty strings, deep nesting), a key deleted, an unknown key added, a list entry
  duplicated — and written back in the file's own format;
* bytes: the example's bytes flipped, cut and spliced, or random bytes.

A loaded snapshot is also measured (GPU owners, fragmentation report) and a loaded policy
builds its strategies: a value that loads but breaks the first consumer (a naive time did)
is a loader bug too.
"""

from __future__ import annotations

import copy
import json
import math
import tomllib
from collections.abc import Callable
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from fuzzing import FUZZ, assert_clean
from infra import EXAMPLES, ROOT
from slurm_defrag.metrics.compute import compute
from slurm_defrag.policy.file import load_policy
from slurm_defrag.service import settings
from slurm_defrag.snapshot_file import load_snapshot

pytestmark = pytest.mark.slow  # 10,000 cases per parser under CI (tests/fuzzing.py)

SNAPSHOT_EXAMPLES = [EXAMPLES / "course.json", EXAMPLES / "mixed-64.json"]
POLICY_EXAMPLES = [EXAMPLES / "policy.toml", ROOT / "docker" / "defrag" / "policy.toml"]
CONFIG_EXAMPLES = [ROOT / "contrib" / "service.toml", ROOT / "docker" / "defrag" / "service.toml"]


class Deep:
    """A value nested ``depth`` lists deep, written as text (no recursion in the writer)."""

    def __init__(self, depth: int) -> None:
        self.depth = depth


HOSTILE_STRINGS = [
    "",
    " ",
    ".",
    "..",
    "/",
    "a\nb",
    "x JobId=1",
    "\x1b[31mred",
    "\x00",
    "[/]",
    "²",
    "١٢",
    "2026-01-01T00:00:00",
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-14:00",
    "1969-12-31T23:59:59Z",
    "IDX:0-99999999",
    "nan",
    "inf",
    "-1",
    "1e999",
    "9" * 40,
    "defrag:protect",
    "enforce",
    "off",
    "postgresql://u:pw@h:abc/d",
    "sqlite:///",
    "*",
]

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 1, 16, 17, 2**31, 2**53 + 1, 2**63, -(2**63) - 1, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(HOSTILE_STRINGS),
)

_TREES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)
VALUES: st.SearchStrategy[Any] = st.integers(0, 9).flatmap(
    # One value in ten nested past the parsers' recursion limits (1,000 for json/tomllib).
    lambda i: st.integers(1, 3000).map(Deep) if i == 0 else _TREES
)


# -- structure-aware mutation ----------------------------------------------------------


def _mutate(doc: Any, draw: st.DrawFn) -> Any:
    """One mutation at a random place of ``doc`` (walked down from the root); the new root."""
    parent: Any = None
    key: Any = None
    node = doc
    while isinstance(node, dict | list) and node and draw(st.integers(0, 3)) > 0:
        parent = node
        key = draw(
            st.sampled_from(sorted(node, key=str) if isinstance(node, dict) else range(len(node)))
        )
        node = node[key]
    op = draw(st.sampled_from(["replace", "replace", "delete", "add", "dup"]))
    if op == "add" and isinstance(node, dict):
        node[draw(st.text(max_size=10) | st.sampled_from(["nope", "slurm", "version"]))] = draw(
            VALUES
        )
        return doc
    if op == "dup" and isinstance(node, list) and node:
        node.append(copy.deepcopy(node[draw(st.integers(0, len(node) - 1))]))
        return doc
    if op == "delete" and parent is not None:
        del parent[key]
        return doc
    value = draw(VALUES)
    if parent is None:
        return value
    parent[key] = value
    return doc


@st.composite
def mutated(draw: st.DrawFn, bases: list[Any]) -> Any:
    doc = copy.deepcopy(draw(st.sampled_from(bases)))
    for _ in range(draw(st.integers(1, 4))):
        doc = _mutate(doc, draw)
    return doc


@st.composite
def mutated_bytes(draw: st.DrawFn, bases: list[bytes]) -> bytes:
    """The example's bytes with flips, cuts and splices; sometimes plain random bytes."""
    if draw(st.integers(0, 4)) == 0:
        return draw(st.binary(max_size=2000))
    data = bytearray(draw(st.sampled_from(bases)))
    for _ in range(draw(st.integers(1, 8))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        op = draw(st.integers(0, 3))
        if op == 0:
            data[at] = draw(st.integers(0, 255))
        elif op == 1:
            del data[at : at + draw(st.integers(1, 64))]
        elif op == 2:
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        else:
            data[at:] = b""
    return bytes(data)


# -- writers (the file formats, from a mutated tree) ------------------------------------


def _json_default(value: object) -> object:
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    raise TypeError(type(value).__name__)


def to_json(doc: Any) -> str:
    if isinstance(doc, Deep):
        return "[" * doc.depth + "]" * doc.depth

    def walk(v: Any) -> Any:
        if isinstance(v, Deep):
            return {"__deep__": v.depth}
        if isinstance(v, dict):
            return {str(k): walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    text = json.dumps(walk(doc), default=_json_default)
    # Splice the deep values in as text: json.dumps would recurse on them.
    while '{"__deep__": ' in text:
        start = text.index('{"__deep__": ')
        end = text.index("}", start)
        depth = int(text[start + 13 : end])
        text = text[:start] + "[" * depth + "]" * depth + text[end + 1 :]
    return text


def _toml_str(s: str) -> str:
    out = []
    for c in s:
        if c in '"\\':
            out.append("\\" + c)
        elif c.isprintable() and c != "\x7f":
            out.append(c)
        else:
            out.append(f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}")
    return '"' + "".join(out) + '"'


def _toml_value(v: Any) -> str:
    if isinstance(v, Deep):
        return "[" * v.depth + "]" * v.depth
    if v is None:
        return '""'  # TOML has no null
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v) if -(2**63) <= v < 2**63 else _toml_str(str(v))  # TOML ints are 64-bit
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _toml_str(v)
    if isinstance(v, datetime | date | time):
        return v.isoformat()
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        pairs = (f"{_toml_str(str(k))} = {_toml_value(x)}" for k, x in v.items())
        return "{" + ", ".join(pairs) + "}"
    raise TypeError(type(v).__name__)


def to_toml(doc: Any) -> str:
    """Every top-level key as ``key = value``, tables inline: any tree, valid TOML."""
    if not isinstance(doc, dict):
        return f"value = {_toml_value(doc)}\n"
    return "".join(f"{_toml_str(str(k))} = {_toml_value(v)}\n" for k, v in doc.items())


def to_yaml(doc: Any) -> str:
    def walk(v: Any) -> Any:
        if isinstance(v, Deep):
            return [walk(Deep(v.depth - 1))] if v.depth > 1 and v.depth < 200 else []
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return yaml.safe_dump(walk(doc), allow_unicode=True)


YAML_HOSTILE = [
    "a: &a [x, x, x]\nb: &b [*a, *a, *a]\nversion: *b\n",
    "base: &b {min_runtime_minutes: 0}\nprotections:\n  <<: *b\n",
    "version: !!python/object/apply:os.system [echo hi]\n",
    "version: !!binary aGVsbG8=\n",
    "version: 1\nlimits: " + "[" * 3000 + "]" * 3000 + "\n",
    "version: 1\n? [a, b]\n: c\n",
    "version: 1\nprotections: {qos: !!set {a: null}}\n",
    "version: 2001-12-14t21:59:43.10-05:00\n",
    "--- 1\n--- 2\n",
]


# -- the loaders under test -------------------------------------------------------------


def _load_and_measure_snapshot(path: Path) -> None:
    snap = load_snapshot(path)
    _ = snap.gpu_owners, snap.free_masks
    compute(snap)


def _load_and_measure_snapshot_text(text: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s.json"
        path.write_text(text)
        _load_and_measure_snapshot(path)


def _load_policy(path: Path) -> None:
    load_policy(path).build_strategies()


def _check(directory: Path, name: str, data: bytes, loader: Callable[[Path], object]) -> None:
    path = directory / name
    path.write_bytes(data)
    assert_clean(loader, path)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("loaders_fuzz")


def _slice(snapshot: dict[str, Any], nodes: int) -> dict[str, Any]:
    """The example's first ``nodes`` nodes with their jobs and the pending ones: the same
    shapes as the whole file at a fraction of the cost per case (mixed-64 is 108 kB)."""
    kept = snapshot["nodes"][:nodes]
    names = {n["name"] for n in kept}
    jobs = [j for j in snapshot["jobs"] if set(j.get("gpus") or {}) <= names]
    return {**snapshot, "nodes": kept, "jobs": jobs}


SNAPSHOT_DOCS = [
    json.loads(SNAPSHOT_EXAMPLES[0].read_text()),
    _slice(json.loads(SNAPSHOT_EXAMPLES[1].read_text()), 6),
]
POLICY_DOCS = [tomllib.loads(p.read_text()) for p in POLICY_EXAMPLES]
CONFIG_DOCS = [tomllib.loads(p.read_text()) for p in CONFIG_EXAMPLES]


@FUZZ
@given(doc=mutated(SNAPSHOT_DOCS))
def test_snapshot_file_structure_fuzz(scratch: Path, doc: Any) -> None:
    _check(scratch, "snapshot.json", to_json(doc).encode(), _load_and_measure_snapshot)


@FUZZ
@given(data=mutated_bytes([to_json(d).encode() for d in SNAPSHOT_DOCS]))
def test_snapshot_file_bytes_fuzz(scratch: Path, data: bytes) -> None:
    _check(scratch, "snapshot.json", data, _load_and_measure_snapshot)


@FUZZ
@given(doc=mutated(POLICY_DOCS), as_yaml=st.booleans())
def test_policy_file_structure_fuzz(scratch: Path, doc: Any, as_yaml: bool) -> None:
    if as_yaml:
        _check(scratch, "policy.yaml", to_yaml(doc).encode(), _load_policy)
    else:
        _check(scratch, "policy.toml", to_toml(doc).encode(), _load_policy)


@FUZZ
@given(
    data=mutated_bytes(
        [p.read_bytes() for p in POLICY_EXAMPLES]
        + [to_yaml(d).encode() for d in POLICY_DOCS]
        + [s.encode() for s in YAML_HOSTILE]
    ),
    suffix=st.sampled_from([".toml", ".yaml"]),
)
def test_policy_file_bytes_fuzz(scratch: Path, data: bytes, suffix: str) -> None:
    _check(scratch, "policy" + suffix, data, _load_policy)


@FUZZ
@given(doc=mutated(CONFIG_DOCS))
def test_service_config_structure_fuzz(scratch: Path, doc: Any) -> None:
    _check(scratch, "service.toml", to_toml(doc).encode(), settings.load)


@FUZZ
@given(data=mutated_bytes([p.read_bytes() for p in CONFIG_EXAMPLES]))
def test_service_config_bytes_fuzz(scratch: Path, data: bytes) -> None:
    _check(scratch, "service.toml", data, settings.load)


def test_the_writers_round_trip_the_examples() -> None:
    """The mutations are only as good as the writers: unmutated, each example loads."""
    assert tomllib.loads(to_toml(POLICY_DOCS[0])) == POLICY_DOCS[0]
    assert tomllib.loads(to_toml(CONFIG_DOCS[0])) == CONFIG_DOCS[0]
    assert json.loads(to_json(SNAPSHOT_DOCS[0])) == SNAPSHOT_DOCS[0]
    for doc in SNAPSHOT_DOCS:
        _load_and_measure_snapshot_text(to_json(doc))
    assert yaml.safe_load(to_yaml(POLICY_DOCS[0])) == POLICY_DOCS[0]
    assert tomllib.loads(to_toml({"a": Deep(3), "b": {"c": "x\ny\x00"}}))["a"] == [[[]]]


SLURM_CONF_EXAMPLES = [ROOT / "docker" / "slurm" / "slurm.conf"]


def _load_slurm_conf_and_render(path: Path) -> object:
    """slurm.conf as ``plugins render`` reads it (nodes' GRES, CPUs, RealMemory, partitions),
    then the table it builds, queue order on: the admin's file is read, never trusted."""
    from slurm_defrag.commands.plugins import RenderOptions, build_table
    from slurm_defrag.slurm.discovery.slurm_conf import parse_slurm_conf

    conf = parse_slurm_conf(path)
    return build_table(conf, {}, RenderOptions(pack_feature=None, short_first=0.1, large_first=4))


@FUZZ
@given(data=mutated_bytes([p.read_bytes() for p in SLURM_CONF_EXAMPLES]))
def test_slurm_conf_bytes_fuzz(scratch: Path, data: bytes) -> None:
    _check(scratch, "slurm.conf", data, _load_slurm_conf_and_render)
