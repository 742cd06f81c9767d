"""Structure-aware hostile Slurm output for the parser fuzz tests (``from slurm_inputs import``).

Cases start from the real recordings (tests/fixtures/slurm-22.05 and slurm-24.11, the
same cluster state as shared/slurm-recordings) so that most of them get past the first
checks and reach the deep code: GRES index lists, host lists, CPU id lists, job
resources, times. Each case keeps only a few records of a recording, so it costs a few
milliseconds.

* JSON: a document with 1-3 recorded records whose values are replaced (other types,
  huge/negative/non-finite numbers, Unicode digits, strings with ``=`` ``,`` ``(`` and
  newlines, ranges like ``IDX:0-99999999``), keys deleted or added, entries duplicated.
* Text: recorded ``scontrol show`` records with values replaced, hostile tokens spliced in
  (``IDX:0-99999999``, ``node[0-99999999]``, ``CPU_IDs=0-99999999``), newlines and
  ``Key=`` tokens inserted; and purely random text.
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
VERSIONS = ("22.05", "24.11")

# -- hostile atoms ---------------------------------------------------------------------

HOSTILE_TOKENS = (
    "IDX:0-99999999",
    "gpu:a100:2(IDX:0-99999999)",
    "gpu:a100:99999999(IDX:0-99999999)",
    "gpu:a100:1(IDX:²)",
    "gpu:a100:²(IDX:0)",
    "gpu:a100:1(IDX:٣)",
    "gpu:a100:" + "9" * 5000,
    "gpu:a100:2(IDX:0-" + "9" * 5000 + ")",
    "gpu:a100:2(IDX:16-17)",
    "gpu:4(IDX:0-3),gpu:h100:2(IDX:0-99999999)",
    "gres/gpu:99999999999999999999999",
    "gres/gpu=²",
    # shard use (domain/gres.py): 22.05 IDX, 24.11+ used/configured, 26.05 "-"
    "shard:h100:2(IDX:0,99999999)",
    "shard:h100:9(3/4,-/4,99999999999/4,0/²)",
    "shard:h100:9(" + ",".join(["5/4"] * 20) + ")",
    "gpu:h100:2(IDX:1-2),shard:h100:9(3/4,0/4,-/-)",
    "gres/shard:" + "9" * 5000,
    "shard:" + "9" * 30 + "(IDX:0-15)",
    "node[0-99999999]",
    "n[0-99999],m[0-99999],o[0-99999]",
    "n[0-9][0-9][0-9][0-9][0-9][0-9]",
    "n" + "[1]" * 1200,
    "node[1-" + "9" * 5000 + "]",
    "node[²]",
    "node[01-02",
    "0-99999999",
    "0-" + "9" * 5000,
    "²",
    "٣",
    "１２",
    "9" * 5000,
    "9" * 400,
    "9" * 400 + "G",
    "99999999999999999999P",
    "-1",
    "0",
    "4294967295",
    "18446744073709551615",
    "99999-01-01T00:00:00",
    "2026-11-29T25:61:61",
    "999999999-00:00:00",
    "99:99",
    "x JobId=1",
    "x ArrayJobId=555 ArrayTaskId=3",
    "x AdminComment=defrag:protect",
    "defrag:nvlink=²",
    "a\nJobId=7 JobState=RUNNING",
    "a=b,c=(d",
    "(null)",
    "N/A",
    "None",
    "",
    " ",
    "=",
    ",",
    "(",
    ")",
    "[",
    "]",
    "\x1b[31m",
    "\u2028",
    "\x00",
    "RUNNING",
    "COMPLETING",
    "PENDING",
    "IDLE+DRAIN",
)

_NUMBERS = (
    0,
    1,
    -1,
    2,
    7,
    16,
    17,
    2**31,
    2**32,
    2**63,
    2**64,
    2**64 + 1,
    -(2**63) - 1,
    10**30,
    10**400,
    253_402_300_800,
    99_999_999,
)
_FLOATS = (float("nan"), float("inf"), float("-inf"), 1e308, -1e308, 0.5, 1.5, -0.0)

# Generated GRES strings and host lists, built once: drawing them per case with builds()
# or from_regex() costs ~0.5 ms of the few ms a case may take.
_BOUNDS = (0, 1, 3, 7, 15, 16, 17, 99_999, 10**8, 10**30)
_RANGES = tuple(f"{a}-{b}" for a in _BOUNDS[:5] for b in _BOUNDS) + tuple(
    f"{a},{b}" for a in _BOUNDS[:4] for b in _BOUNDS[3:]
)
GENERATED = tuple(
    f"gpu:{t}:{n}(IDX:{r})"
    for t in ("a100", "a100-80g", "1g.10gb", "²")
    for n in (0, 2, 16, 10**8)
    for r in _RANGES[::3]
) + tuple(f"{p}[{r}]" for p in ("node", "n", "") for r in _RANGES)

_STRINGS = HOSTILE_TOKENS + GENERATED

hostile_text = st.one_of(
    st.sampled_from(HOSTILE_TOKENS),
    st.sampled_from(GENERATED),
    st.text(max_size=12),
)
"""Strings that probe the GRES, host list, number, time and duration parsers."""


def _deep(depth: int) -> Any:
    v: Any = "x"
    for i in range(depth):
        v = [v] if i % 2 else {"number": v}
    return v


_CONTAINERS = (
    [],
    {},
    [None],
    ["x"],
    [1],
    {"set": True, "number": 2**70},
    {"set": True, "infinite": False, "number": "7"},
    {"number": None},
    {"set": "yes", "number": float("nan")},
    ["RUNNING", 5],
    [HOSTILE_TOKENS[0], "node01"],
    _deep(20),
    _deep(61),
)
_VALUES = (None, True, False, *_NUMBERS, *_FLOATS)

hostile_value = st.one_of(
    st.sampled_from(_VALUES),
    st.sampled_from(_STRINGS),
    # copied: a mutation must never change the constant seen by later cases
    st.sampled_from(_CONTAINERS).map(copy.deepcopy),
    st.integers(),
    st.text(max_size=12),
)
"""Any JSON-ish value a field might hold instead of what Slurm documents."""


# -- recordings ------------------------------------------------------------------------


@cache
def recording(version: str, name: str) -> str:
    return (FIXTURES / f"slurm-{version}" / name).read_text(encoding="utf-8")


@cache
def json_parts(version: str, name: str, key: str) -> tuple[str, tuple[str, ...]]:
    """A recorded document split into its frame (no records) and its records, as JSON text
    (re-parsed per case: cheaper than a deep copy, and every case gets fresh objects)."""
    data = json.loads(recording(version, name))
    records = data.pop(key)
    if isinstance(records, dict):  # pyslurm dumps: id -> object
        records = list(records.values())
    return json.dumps(data), tuple(json.dumps(r) for r in records)


def _slots(value: Any, out: list[tuple[Any, Any]], depth: int = 0) -> None:
    """Every (container, key) pair below ``value``: where a mutation can land."""
    if depth > 12:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            out.append((value, k))
            _slots(v, out, depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.append((value, i))
            _slots(v, out, depth + 1)


_DIGIT_SWAPS = ("²", "٣", "１", "9" * 30, "99999999")


# Strategies built once: building one inside a composite on every draw costs more than
# the draw itself (a case makes a dozen draws).
_INDEX = st.integers(0, 2**16)
_CHANGES = st.integers(1, 4)
_JSON_KIND = st.sampled_from(
    ("replace", "replace", "replace", "edit", "delete", "duplicate", "add", "wrap")
)
_TEXT_KIND = st.sampled_from(("value", "value", "token", "newline", "cut", "digits"))
_SWAP = st.sampled_from(_DIGIT_SWAPS)
_ADD_KEY = st.sampled_from(("x", "nodes", "gres", "job_id", "errors"))
_WRAP = st.sampled_from((lambda v: [v], lambda v: {"number": v}))
_SEPARATOR = st.sampled_from((" ", "\n", "\n   ", ""))
_NEWLINE = st.sampled_from(("\n", "\n   ", "\r\n", "\u2028"))
_FEW = st.integers(0, 3)
_CUT = st.integers(1, 40)
_VERSION = st.sampled_from(VERSIONS)


def pick(draw: st.DrawFn, n: int) -> int:
    """An index below ``n`` (one shared strategy instead of one per length)."""
    return draw(_INDEX) % n


@st.composite
def mutated_json(draw: st.DrawFn, root: Any) -> Any:
    """``root`` (freshly parsed, so mutated in place) with 1-4 hostile changes."""
    slots: list[tuple[Any, Any]] = []  # found once: walking a 24.11 job costs ~0.3 ms
    _slots(root, slots)
    if not slots:
        return root
    for _ in range(draw(_CHANGES)):
        container, key = slots[pick(draw, len(slots))]
        if key not in container if isinstance(container, dict) else key >= len(container):
            continue  # removed by an earlier change
        kind = draw(_JSON_KIND)
        if kind == "replace":
            container[key] = draw(hostile_value)
        elif kind == "edit" and isinstance(container[key], str) and container[key]:
            s = container[key]
            if re.search(r"[0-9]", s) and draw(_FEW) < 2:
                container[key] = re.sub(r"[0-9]+", draw(_SWAP), s, count=draw(_FEW))
            else:
                at = pick(draw, len(s) + 1)
                container[key] = s[:at] + draw(hostile_text) + s[at:]
        elif kind == "delete":
            del container[key]
        elif kind == "duplicate" and isinstance(container, list):
            container.insert(key, json.loads(json.dumps(container[key], allow_nan=True)))
        elif kind == "add" and isinstance(container, dict):
            container[draw(_ADD_KEY)] = draw(hostile_value)
        elif kind == "wrap":
            container[key] = draw(_WRAP)(container[key])
    return root


@st.composite
def json_document(draw: st.DrawFn, version: str, name: str, key: str) -> Any:
    """1-2 recorded records of ``name`` (under ``key``) in their frame, then mutated."""
    frame, records = json_parts(version, name, key)
    picked = [pick(draw, len(records)) for _ in range(1 + draw(_FEW) // 2)]
    doc = json.loads(frame)
    doc[key] = [json.loads(records[i]) for i in picked]
    # Mostly the records: the frame is only ``meta`` and ``errors`` (a tenth of the cases).
    draw(mutated_json(doc if draw(_INDEX) % 10 == 0 else doc[key]))
    return doc


# -- scontrol text ---------------------------------------------------------------------

# Key=value tokens that reach GRES, host list, CPU id, memory, time and id parsing.
TEXT_TOKENS = (
    "JobId=5",
    "JobId=²",
    "JobId=99999999999999999999",
    "ArrayJobId=7",
    "ArrayTaskId=²",
    "JobState=RUNNING",
    "JobState=",
    "NumNodes=²",
    "NumNodes=" + "9" * 5000,
    "NumCPUs=99999999999999999999999",
    "NtasksPerN:B:S:C=²:0:*:*",
    "NtasksPerN:B:S:C=" + "9" * 5000 + ":0:*:*",
    "Nodes=node[0-99999999] CPU_IDs=0-3 Mem=100 GRES=gpu:a100:1(IDX:0)",
    "Nodes=node01 CPU_IDs=0-99999999 Mem=0 GRES=",
    "Nodes=node01 CPU_IDs=0-3 Mem=" + "9" * 400 + " GRES=gpu:a100:2(IDX:0-99999999)",
    "Nodes=node01 CPU_IDs=² Mem=1 GRES=gpu:a100:1(IDX:²)",
    "GRES=gpu:a100:2(IDX:0-99999999)",
    "GresUsed=gpu:a100:1(IDX:²)",
    "GresUsed=gpu:h100:0(IDX:N/A),shard:h100:3(3/4,-/4,0/x)",
    "Nodes=node01 CPU_IDs=0 Mem=0 GRES=shard:3(IDX:0-99999999)",
    "Gres=gpu:h100:8(S:0-1),shard:h100:" + "9" * 5000,
    "TresPerNode=gres/shard:²",
    "Gres=gpu:a100:" + "9" * 5000,
    "TresPerNode=gres/gpu:99999999999999999999",
    "TresPerJob=gres/gpu=²",
    "MinMemoryNode=" + "9" * 400 + "T",
    "RealMemory=²",
    "TimeLimit=" + "9" * 5000,
    "TimeLimit=999999999-99:99:99",
    "SubmitTime=99999-01-01T00:00:00",
    "StartTime=9999-12-31T23:59:59",
    "EndTime=0000-00-00T00:00:00",
    "Nodes=n[0-99999],m[0-99999]",
    "Nodes=" + "n[1]" * 600,
    "PriorityTier=²",
    "Weight=" + "9" * 5000,
    "CPUTot=-5",
    "Comment=defrag:nvlink=²",
    "AdminComment=x JobId=1",
    "Partitions=a,,b",
    "State=IDLE+DRAIN",
)


_TEXT_TOKEN = st.sampled_from(TEXT_TOKENS)


@cache
def text_records(version: str, name: str) -> tuple[str, ...]:
    """A recording split into its records (a record starts at an unindented line)."""
    records: list[str] = []
    for line in recording(version, name).splitlines(keepends=True):
        if records and (line[:1].isspace() or not line.strip()):
            records[-1] += line
        else:
            records.append(line)
    return tuple(records)


@st.composite
def mutated_text(draw: st.DrawFn, text: str) -> str:
    """``text`` with 1-4 hostile edits: a value replaced, a token or newline spliced in."""
    for _ in range(draw(_CHANGES)):
        kind = draw(_TEXT_KIND)
        if kind == "value":
            values = list(re.finditer(r"(?<==)[^\s]*", text))
            if values:
                v = values[pick(draw, len(values))]
                text = text[: v.start()] + draw(hostile_text) + text[v.end() :]
                continue
        at = pick(draw, len(text) + 1)
        if kind == "token" or kind == "value":
            text = text[:at] + draw(_SEPARATOR) + draw(_TEXT_TOKEN) + " " + text[at:]
        elif kind == "newline":
            text = text[:at] + draw(_NEWLINE) + text[at:]
        elif kind == "cut":
            text = text[:at] + text[at + draw(_CUT) :]
        else:
            text = re.sub(r"[0-9]+", draw(_SWAP), text, count=1 + draw(_FEW))
    return text


@st.composite
def scontrol_text(draw: st.DrawFn, name: str) -> str:
    """1-3 records of ``scontrol show ...`` (either release, multi-line or ``-o``), mutated."""
    version = draw(_VERSION)
    records = text_records(version, name)
    picked = [records[pick(draw, len(records))] for _ in range(1 + draw(_FEW) % 3)]
    return draw(mutated_text("".join(picked)))


random_text = st.text(
    alphabet=st.sampled_from(list("=:,()[]- \n\t0123456789²٣abcJobIdNodesGRESIDX"))
    | st.characters(),
    max_size=300,
)
"""Text with no structure at all (weighted towards the characters the parsers split on)."""
