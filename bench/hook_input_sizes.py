"""Benchmark: wall time job_submit.lua spends on hostile sizes, and on the route file.

    PYTHONPATH=src .venv/bin/python bench/hook_input_sizes.py [--old]

Loads slurm-plugins/job_submit.lua into lupa's Lua 5.1 (the release Debian's Slurm links,
with its C string library: real speed, unlike tests/plugins/test_hostile_sizes.py, which
counts instructions through a Lua port of the matcher) with the unit tests' node table,
and times, best of five, one submission and one update carrying 1 MiB of hostile text in
each user-controlled field (and the same at each field's cap, the most the script
parses); then the route file: the service's file for 4,000 8-GPU nodes, and the
costliest file under the caps. ``--old`` also times the script before issue #40 on
``tres_per_node`` ("g", spaces, "x": its trim() was quadratic) at 4-16 KiB. Prints
milliseconds (docs/security.md records a run).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lupa import lua51

from slurm_defrag.actuator.route_file import RouteFile

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "slurm-plugins" / "job_submit.lua"
TABLE = ROOT / "slurm-plugins" / "tests" / "fixtures" / "defrag_nodes.lua"
MIB = 1024 * 1024
STUB = """
local s = { SUCCESS = 0, NO_VAL = 4294967294, NO_VAL16 = 65534, JOB_SHARED_NONE = 0 }
local function quiet() end
s.log_info, s.log_debug, s.log_user, s.log_error, s.log_verbose = quiet, quiet, quiet, quiet, quiet
slurm = s
"""
FIELDS = (
    "tres_per_node", "tres_per_socket", "tres_per_job", "tres_per_task", "comment",
    "admin_comment", "partition", "reservation", "name", "prefer", "features", "req_nodes",
    "exc_nodes", "dependency",
)  # fmt: skip
CAPS = dict.fromkeys(FIELDS, 4096) | {"comment": 16384, "admin_comment": 16384}
NO_VAL = 4294967294


def _repeat(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


KINDS: dict[str, Callable[[int], str]] = {
    "spaces": lambda n: "g" + " " * (n - 2) + "x",
    "mixed": lambda n: _repeat("gres/gpu:a100:2, shard:3=x;\t defrag:protect,defrag-1 ", n),
    "commas": lambda n: "," * n,
}


def runtime(script: str) -> Any:
    lua = lua51.LuaRuntime(unpack_returned_tuples=True)
    lua.execute(STUB)
    lua.globals().DEFRAG_NODES_FILE = str(TABLE)
    lua.execute(script)
    return lua


def best(fn: Callable[[], object], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def best_call(lua: Any, make: Callable[[], tuple[object, ...]], runs: int = 5) -> float:
    """Best of ``runs`` of slurm_job_submit/modify on fresh arguments (made untimed: a
    1 MiB string takes a while to cross from Python into Lua)."""
    g = lua.globals()
    times = []
    for _ in range(runs):
        args = make()
        fn = g.slurm_job_submit if len(args) == 3 else g.slurm_job_modify
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def field_times(lua: Any) -> None:
    print(f"{'field':16} {'kind':7} {'submit 1 MiB':>13} {'update 1 MiB':>13} {'at cap':>8} (ms)")
    worst = 0.0
    t = lua.table_from
    for field in FIELDS:
        for kind, make in KINDS.items():
            big, at_cap = make(MIB), make(CAPS[field])

            def submit(value: str, field: str = field) -> tuple[object, ...]:
                return t({"min_nodes": NO_VAL, "max_nodes": NO_VAL, field: value}), t({}), 1000

            def update(value: str, field: str = field) -> tuple[object, ...]:
                rec = t({"job_id": 1, "min_nodes": 1, "max_nodes": 1})
                return t({"comment": "x", field: value}), rec, t({}), 1000

            times = (
                best_call(lua, lambda v=big: submit(v)),
                best_call(lua, lambda v=big: update(v)),
                best_call(lua, lambda v=at_cap: submit(v)),
            )
            worst = max(worst, *times)
            print(f"{field:16} {kind:7} {times[0]:13.3f} {times[1]:13.3f} {times[2]:8.3f}")
    print(f"worst: {worst:.3f} ms")


def route_times(lua: Any) -> None:
    d = lua.globals().slurm_defrag
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "route"
        entry = {
            "score": True,
            "step": 40.0,
            "shards_per_gpu": 1000,
            "mix": [{"cpus": 2, "gpus": 1, "milli": 1000, "weight": 0.6}],
            "nodes": [
                {
                    "feature": f"defrag_at_node{i:05d}",
                    "model": "a100",
                    "free": [0] + [1000] * 7,
                    "cpus": 64,
                    "mem": 500_000,
                    "idle": False,
                    "rank": 123_456_789 + i,
                    "partitions": ["gpu", "all"],
                }
                for i in range(4000)
            ],
        }
        RouteFile(path, 180).write(entry)
        size = path.stat().st_size
        print(f"route file, 4,000 nodes ({size} B): {best(lambda: d.load_route(str(path))):.1f} ms")
        node = "node defrag_at_a - 4 -1 1 1 0 1000 *\n"
        head = "-- x\nroute 2 1000 180 40 1000 0\n"
        path.write_text(head + node * 32766, encoding="ascii")  # the line cap, no end line
        print(
            f"route file, 32,766 one-GPU node lines, no end line ({path.stat().st_size} B): "
            f"{best(lambda: d.load_route(str(path))):.1f} ms"
        )
        path.write_text("-- x\n" + "x" * (4 * MIB + 1), encoding="ascii")
        print(f"route file over 4 MiB: {best(lambda: d.load_route(str(path))):.3f} ms")


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout


def old_times() -> None:
    """The script as it was before the caps (the parent of the commit that added them;
    HEAD's own when they are not committed yet)."""
    path = "slurm-plugins/job_submit.lua"
    added = _git("log", "--reverse", "--format=%H", "-S", "FIELD_CAPS", "--", path).split()
    lua = runtime(_git("show", f"{added[0]}~1:{path}" if added else f"HEAD:{path}"))
    g = lua.globals()
    for n in (4096, 8192, 16384):
        value = "g" + " " * (n - 2) + "x"
        jd = lua.table_from({"tres_per_node": value})
        ms = best(lambda jd=jd: g.slurm_job_submit(jd, lua.table_from({}), 1000), runs=1)
        print(f"before the fix: tres_per_node of {n} B: {ms:.0f} ms")


def main() -> None:
    lua = runtime(SCRIPT.read_text(encoding="utf-8"))
    print(lua.eval("_VERSION"))
    field_times(lua)
    route_times(lua)
    if "--old" in sys.argv:
        old_times()


if __name__ == "__main__":
    main()
