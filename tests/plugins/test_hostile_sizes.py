"""job_submit.lua does work linear in what a user sends, and reads the route file as data
(issue #40, "Hostile input, round two").

Counted, not timed: the script runs in a Lua 5.1 whose pattern matching is the Lua port
of the C matcher (``hook_cost.py``), so a count hook sees every step of it, backtracking
included. Before the fix, ``trim()``'s ``^%s*(.-)%s*$`` took 38 s on a 40 KB
``tres_per_node``; here it spends the budget at 4 KB already.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from lupa import lua51

from slurm_defrag.actuator.route_file import RouteFile, route_lines

from .hook_cost import PORT, CountedHook
from .plugins_support import PLUGINS

FIXTURE = PLUGINS / "tests" / "fixtures" / "defrag_nodes.lua"
KIB, MIB = 1024, 1024 * 1024

BUDGET = 50_000_000
"""Instructions one submission or update may cost, whatever it carries: the most the
fixed script spends is ~15 M (a 16 KiB comment, each byte a separator, through the
ported matcher); the old trim spent ~10^9 on 4 KiB and ~10^13 on 1 MiB."""
GROWTH = 2
"""Linear: 16 times the input costs at most GROWTH x 16 times the work (+ SLACK)."""
SLACK = 20_000

# Every field of job_desc (and, on update, job_rec) the script reads.
FIELDS = (
    "tres_per_node",
    "tres_per_socket",
    "tres_per_job",
    "tres_per_task",
    "comment",
    "admin_comment",
    "partition",
    "reservation",
    "name",
    "prefer",
    "features",
    "req_nodes",
    "exc_nodes",
    "dependency",
)
CAPS = dict.fromkeys(FIELDS, 4 * KIB) | {"comment": 16 * KIB, "admin_comment": 16 * KIB}


def _repeat(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


# n bytes of each kind of hostile text
KINDS = {
    "spaces": lambda n: "g" + " " * (n - 2) + "x",  # the old trim's quadratic case
    "commas": lambda n: "," * n,
    "colons": lambda n: "gpu" + ":" * (n - 3),
    "gres": lambda n: _repeat("gres/gpu:", n),
    "digits": lambda n: "gres/gpu:" + "9" * (n - 9),
    "shard": lambda n: "shard:" + "a" * (n - 7) + "=",  # asks_shards' old "([^:=]+)$"
    "mixed": lambda n: _repeat("gres/gpu:a100:2, shard:3=x;\t defrag:protect,defrag-1 ", n),
}
NO_VAL, NO_VAL16 = 4294967294, 65534
BASE_DESC = {
    "min_nodes": NO_VAL,
    "max_nodes": NO_VAL,
    "num_tasks": NO_VAL,
    "ntasks_per_node": NO_VAL16,
    "shared": NO_VAL16,
    "user_id": 1000,
}
BASE_REC = {"job_id": 42, "min_nodes": 1, "max_nodes": 1, "partition": "gpu"}


@pytest.fixture(scope="module")
def hook() -> CountedHook:
    return CountedHook(FIXTURE)


# -- the measure: the ported matcher answers as the C one ------------------------------------

PATTERNS = (
    # job_submit.lua's own
    "[^%s,;]+",
    "^(%d+)([kKmMgG]?)$",
    "[^,]+",
    "^gres[:/](.*)$",
    "^([%w_%.%-]+)(.*)$",
    "^([%w_%.%-]+)[:=]([^:=]+)$",
    "^[%w_%.%-]+$",
    "^[%w_]",
    "^shard[:=]",
    "^.*[:=]([^:=]*)$",
    "^(.*)/[^/]*$",
    "[^,%s]+",
    "%S+",
    "%S",
    "([^\n]*)\n",
    "^(%l+)",
    "^node ([%w_]+) ([!-+%-.-~]+) ([%d%.eE%+%-]+) ([01])$",
    "^end (%d+) (%d+)$",
    # the old trim, and the rest of the pattern language
    "^%s*(.-)%s*$",
    "([^:=]+)$",
    "a-b",
    "a?b",
    "()a()",
    "%bxy",
    "%f[%w]%w+",
    "(a)(b)%2%1",
    "[%]]",
    "[^%a%d]+",
    "[a-]",
    "[]]",
    "x*$",
    "^$",
    ".",
    "%.",
    "[%p]+",
    "%u%l*",
    "%x+",
    "%c",
    "[%z]",
    "(h)(e)(l)(l)(o)",
    "%w+%s*=%s*%w+",
)
SUBJECTS = (
    "",
    " ",
    "gres/gpu:a100:2",
    " gres:gpu:4 , shard:3=x;\t",
    "abba",
    "xaxbyy)",
    "(((x)))",
    "baab",
    "k=v, key = value",
    "Hello World 123",
    "]]",
    "a-b-a",
    "--\n--\nx",
    "a\0b",
    "node defrag_at_a - 4 -1 1 1 0 1000 *",
    "end 2 3",
    "/etc/slurm/x.lua",
    "shard:1:2=",
)
COMPARE = """
local P = ...
local C = { find = string.find, match = string.match, gmatch = string.gmatch,
  gsub = string.gsub }
local function pack(ok, ...) return { ok = ok, n = select("#", ...), ... } end
local function same(a, b)
  if a.ok ~= b.ok then return false end
  if not a.ok then return true end -- both raise: the texts may differ
  if a.n ~= b.n then return false end
  for i = 1, a.n do if a[i] ~= b[i] then return false end end
  return true
end
-- Do the C function and the port answer alike? (both raising counts as alike)
local function alike(name, ...)
  return same(pack(pcall(C[name], ...)), pack(pcall(P[name], ...)))
end
local function all(name, s, p)
  local out = {}
  for a, b, c in (name == "C" and C or P).gmatch(s, p) do
    out[#out + 1] = tostring(a) .. "|" .. tostring(b) .. "|" .. tostring(c)
  end
  return table.concat(out, ";")
end
return function(s, p)
  for _, init in ipairs({ 1, 2, -3, 40 }) do
    if not alike("find", s, p, init) then return "find " .. init end
    if not alike("match", s, p, init) then return "match " .. init end
    if not alike("find", s, p, init, true) then return "plain find " .. init end
  end
  if not same(pack(pcall(all, "C", s, p)), pack(pcall(all, "P", s, p))) then
    return "gmatch"
  end
  for _, repl in ipairs({ "<%0>", "%1", "%%", "x" }) do
    if not alike("gsub", s, p, repl) then return "gsub " .. repl end
    if not alike("gsub", s, p, repl, 1) then return "gsub 1 " .. repl end
  end
  if not alike("gsub", s, p, function(x) return string.upper(tostring(x)) end) then
    return "gsub function"
  end
  if not alike("gsub", s, p, { a = "A" }) then return "gsub table" end
  return nil
end
"""


def test_the_ported_matcher_answers_as_lua_5_1s() -> None:
    """The measure is only as good as the port: find (with and without init, plain),
    match, gmatch and gsub (string, function and table replacements, a maximum) answer
    exactly as the C functions, for the script's patterns and the rest of the language."""
    lua = lua51.LuaRuntime(unpack_returned_tuples=True)
    port = lua.execute(PORT.read_text(encoding="utf-8"))
    compare = lua.execute(COMPARE, port)
    wrong = [(s, p, why) for s in SUBJECTS for p in PATTERNS if (why := compare(s, p))]
    assert not wrong, wrong[:10]


def cost(hook: CountedHook, entry: str, field: str, value: str) -> int:
    """Instructions the script spends on one submission or update carrying ``value`` in
    ``field``; fails if the budget is spent or the script raised."""
    hook.forget_logs()
    if entry == "submit":
        jd = hook.table(BASE_DESC | {field: value})
        c = hook.measure(BUDGET, hook.g.slurm_job_submit, jd, hook.table({}), 1000)
    else:  # an update by the job's owner: the field in the update, or in the record
        desc = {field: value} if entry == "update" else {}
        rec = {field: value} if entry == "record" else {}
        jd = hook.table(BASE_DESC | {"comment": "x"} | desc)
        c = hook.measure(
            BUDGET, hook.g.slurm_job_modify, jd, hook.table(BASE_REC | rec), hook.table({}), 1000
        )
    assert not c.over_budget, f"{entry} {field}: over {BUDGET} instructions at {len(value)} B"
    assert c.ok, c.result
    assert not hook.logs("error"), hook.logs("error")
    return c.instructions


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("field", FIELDS)
def test_every_user_field_costs_work_linear_in_its_size(
    hook: CountedHook, field: str, kind: str
) -> None:
    """Up to 1 MiB of each kind of text in each field, on submit and on update (in the
    update, or already in the record): 16 times the bytes cost at most 2 x 16 times the
    instructions, below the field's cap (where the script parses it) and above it (where
    it refuses to), and never more than the budget."""
    make = KINDS[kind]
    cap = CAPS[field]
    for entry in ("submit", "update", "record"):
        small, at_cap = (
            cost(hook, entry, field, make(cap // 16)),
            cost(hook, entry, field, make(cap)),
        )
        assert at_cap <= GROWTH * 16 * small + SLACK, (entry, small, at_cap)
        big, huge = cost(hook, entry, field, make(64 * KIB)), cost(hook, entry, field, make(MIB))
        assert huge <= GROWTH * 16 * big + SLACK, (entry, big, huge)


def test_the_old_trim_spends_the_budget_many_times_over() -> None:
    """The same measure on the script before the fix (its trim() inline): 4 KiB of spaces
    between two letters already costs more than the budget."""
    old_trim = """
    local function trim(s) return (string.gsub(s, "^%s*(.-)%s*$", "%1")) end
    function COST(n)
      local s = "g" .. string.rep(" ", n - 2) .. "x"
      return #trim(s)
    end
    """
    hook = CountedHook(FIXTURE)
    hook.lua.execute(old_trim)
    small = hook.measure(BUDGET, hook.g.COST, 256)
    large = hook.measure(BUDGET, hook.g.COST, 4 * KIB)
    assert small.ok
    assert small.result == 256
    assert large.over_budget  # quadratic: 256 times the work for 16 times the bytes


def test_over_the_caps_the_job_is_refused_or_left_as_it_is(hook: CountedHook) -> None:
    """What a field over its cap does (documented beside FIELD_CAPS in the script)."""
    caps = dict(hook.d.FIELD_CAPS.items())
    assert caps == {f: CAPS[f] for f in caps}
    jd = hook.table(BASE_DESC | {"tres_per_node": "gres/gpu:1," + " " * 4096})
    assert hook.g.slurm_job_submit(jd, hook.table({}), 1000) == 2072  # unreadable GPU request
    jd = hook.table(BASE_DESC | {"tres_per_node": "gres/gpu:2", "comment": "x" * (16 * KIB + 1)})
    assert hook.g.slurm_job_submit(jd, hook.table({}), 1000) == 0
    assert jd["admin_comment"] is None  # left as it is
    jd = hook.table(BASE_DESC | {"reservation": "r," * 3000})
    assert hook.g.slurm_job_submit(jd, hook.table({}), 1000) == 2053  # may hide defrag-*


# -- the route file is data (task 5) -------------------------------------------------------


def _route_file(tmp: Path, nodes: int) -> Path:
    """A route file as the service writes it, for ``nodes`` 8-GPU nodes."""
    path = tmp / f"route-{nodes}.txt"
    entry = {
        "score": True,
        "step": 40.0,
        "shards_per_gpu": 1000,
        "mix": [
            {"cpus": 2, "gpus": 1, "milli": 1000, "weight": 0.6},
            {"cpus": 4, "gpus": 2, "milli": 1000, "weight": 0.4, "models": ["a100"]},
        ],
        "nodes": [
            {
                "feature": f"defrag_at_n{i}",
                "model": "a100",
                "free": [0, 1000, 1000, 1000, 1000, 1000, 1000, 1000],
                "cpus": 64,
                "mem": 500_000,
                "idle": False,
                "rank": i,
                "partitions": ["gpu", "all"],
            }
            for i in range(nodes)
        ],
    }
    RouteFile(path, 180, clock=lambda: 1000.0).write(entry)
    return path


ROUTE_BUDGET = 100_000_000
"""A route file is read once per service cycle, and may be 4 MiB: its budget is larger."""


def _load(hook: CountedHook, path: Path, budget: int = ROUTE_BUDGET) -> tuple[int, object, str]:
    c = hook.measure(budget, hook.d.load_route, str(path))
    assert not c.over_budget, c.result
    assert c.ok, c.result
    return c.instructions, c.result, str(c.second)


def test_the_services_route_file_loads_in_linear_work(hook: CountedHook, tmp_path: Path) -> None:
    small, route, _ = _load(hook, _route_file(tmp_path, 64))
    assert route is not None
    assert len(route["nodes"]) == 64
    large, route, _ = _load(hook, _route_file(tmp_path, 1024))
    assert route is not None
    assert route["nodes"][1024]["feature"] == "defrag_at_n1023"
    assert large <= GROWTH * 16 * small + SLACK, (small, large)


@pytest.mark.parametrize(
    "text",
    [
        "return { x = ('x'):rep(2^26) }\n",  # 64 MiB from one instruction (2^29 in the issue)
        "return (('x'):rep(2^20) .. 'y'):find(('.-'):rep(20) .. 'z')\n",  # minutes of find
        "while true do end\n",
        "MARK = true return {}\n",
        "\x1bLua\x51\x00 bytecode",
    ],
    ids=["rep", "find", "loop", "global", "bytecode"],
)
def test_code_in_the_route_file_is_text_it_refuses(
    hook: CountedHook, tmp_path: Path, text: str
) -> None:
    path = tmp_path / "route"
    path.write_bytes(("-- slurm-defrag route x\n" + text).encode("latin-1"))
    _spent, route, err = _load(hook, path, budget=100_000)
    assert route is None
    assert "line 2: not a route file of format 2" in err
    assert hook.g.MARK is None


def test_a_route_file_over_the_cap_is_refused_unread(hook: CountedHook, tmp_path: Path) -> None:
    path = tmp_path / "route"
    with path.open("wb") as fh:
        fh.write(b"-- slurm-defrag route x\n")
        fh.truncate(4 * MIB + 1)  # sparse: 4 MiB + 1 of zeros
    _, route, err = _load(hook, path, budget=20_000)
    assert route is None
    assert "larger than 4194304 bytes" in err
    with path.open("r+b") as fh:
        fh.truncate(4 * MIB)  # at the cap it is read, a line of at most 64 KiB at a time
        fh.seek(24 + 65537)
        fh.write(b"\n")
    _spent, route, err = _load(hook, path, budget=10_000_000)
    assert route is None
    assert "line 2: longer than 65536 bytes" in err


@pytest.mark.parametrize(
    "unit",
    [
        "--\n",
        "\n",
        "node defrag_at_a - 4 -1 1 1 0 1000 *\n",
        "node defrag_at_a a100 4 -1 1 1 0 " + ",".join(["1000"] * 1024) + " *\n",
        "node defrag_at_a a100 4 -1 1 1 0 1000 " + ",".join(["p"] * 4000) + "\n",
        "mix 1 1 1000 " + "9" * 30 + " " + ",".join(["a" * 250] * 200) + "\n",
    ],
    ids=["comments", "blank", "nodes", "free-lists", "partition-lists", "long-tokens"],
)
def test_hostile_route_text_costs_work_linear_in_its_size(
    hook: CountedHook, tmp_path: Path, unit: str
) -> None:
    """Whatever a file under the cap holds, the work is linear in its size: here valid
    records, the most the reader does for a byte, up to 128 KiB without an end line (or
    past the line cap)."""
    spent = []
    for size in (8 * KIB, 128 * KIB):
        path = tmp_path / "route"
        head = "-- slurm-defrag route x\nroute 2 1000 180 40 1000 0\n"
        path.write_text(head + unit * max(1, size // len(unit)), encoding="ascii")
        n, route, err = _load(hook, path)
        assert route is None
        assert "no end line" in err or "more than 32768 lines" in err, err
        spent.append(n)
    assert spent[1] <= GROWTH * 16 * spent[0] + SLACK, spent


def test_writer_and_reader_agree_on_every_value(hook: CountedHook, tmp_path: Path) -> None:
    """Names with every character the format holds, negative and float numbers, the
    empty lists and the absent ones: written, read back the same."""
    odd = "".join(chr(c) for c in range(33, 127) if chr(c) != ",")
    entry = {
        "score": False,
        "step": 40.0,
        "shards_per_gpu": 4,
        "mix": [
            {"cpus": 1, "gpus": 1, "milli": 250, "weight": 1e-05},
            {"cpus": 2, "gpus": 2, "milli": 1000, "weight": 3.5, "models": [odd, "t4"]},
            {"cpus": 2, "gpus": 1, "milli": 1000, "weight": 1, "models": []},
        ],
        "nodes": [
            {
                "feature": "defrag_at_a",
                "model": odd,
                "free": [1000, 0],
                "cpus": 1 << 20,
                "mem": -1,
                "idle": True,
                "rank": 4294967295,
                "partitions": [odd, "p"],
                "no_shards": True,
            },
            {
                "feature": "defrag_at_b",
                "model": "",
                "free": [],
                "cpus": 0,
                "mem": 0,
                "idle": False,
                "rank": 2,
                "partitions": [],
            },
        ],
    }
    path = tmp_path / "route"
    RouteFile(path, 180, clock=lambda: 1000.0).write(entry)
    _, r, err = _load(hook, path)
    assert r is not None, err
    assert (r["generated_at"], r["valid_s"], r["step"], r["shards_per_gpu"]) == (1000, 180, 40, 4)
    assert r["score"] is False
    mix = [dict(t.items()) for t in r["mix"].values()]
    assert math.isclose(mix[0]["weight"], 1e-05)
    assert mix[0].get("models") is None
    assert list(mix[1]["models"].values()) == [odd, "t4"]
    assert list(mix[2]["models"].values()) == []
    a, b = r["nodes"][1], r["nodes"][2]
    assert (a["model"], list(a["free"].values()), a["cpus"], a["mem"]) == (
        odd,
        [1000, 0],
        1 << 20,
        -1,
    )
    assert (a["idle"], a["rank"], a["no_shards"]) == (True, 4294967295, True)
    assert list(a["partitions"].values()) == [odd, "p"]
    assert (b["model"], list(b["free"].values()), list(b["partitions"].values())) == ("", [], [])


@pytest.mark.parametrize(
    "bad",
    [
        {"model": "a b"},
        {"model": "a,b"},
        {"model": "-"},
        {"partitions": ["é"]},
        {"feature": "defrag-at"},
        {"cpus": float("nan")},
        {"free": [1000, "x"]},
        {"idle": 1},
        {"extra": 1},
    ],
)
def test_the_writer_refuses_what_the_format_cannot_hold(bad: dict[str, object]) -> None:
    node = {"feature": "defrag_at_a", "model": "a100", "free": [1000], "cpus": 4, "mem": -1,
            "idle": True, "rank": 1, "partitions": ["p"]}  # fmt: skip
    entry = {"step": 40.0, "shards_per_gpu": 1000, "mix": [], "nodes": [node | bad]}
    with pytest.raises(ValueError, match="route file: nodes\\[0\\]"):
        route_lines(entry, generated_at=1, valid_s=180)
