"""job_submit.lua in an embedded Lua 5.1 (lupa) whose work is counted deterministically.

A count hook (``debug.sethook(f, "", STEP)``) counts Lua VM instructions, but the built-in
``string.find/match/gmatch/gsub`` are C functions: the hook sees one instruction for a
match that backtracks for half a minute. So :class:`CountedHook` first puts the step-for-
step Lua port of Lua 5.1's matcher (``lua51_patterns.lua``) in their place (the string
metatable's ``__index`` is the ``string`` table, so ``s:match()`` uses it too); then every
step of the matching, backtracking included, is a counted instruction. The other C
functions the script calls (``string.sub``, ``string.byte``, ``table.concat``,
``tonumber``) are single passes, linear in their input.

Lua 5.1 because Debian builds Slurm 22.05 and 24.11 against liblua5.1, and lupa's
``lua51`` is what the simulator runs the script with (``sim/submit_hook.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lupa import lua51

from .plugins_support import PLUGINS

PORT = Path(__file__).with_name("lua51_patterns.lua")
STEP = 100
"""Instructions between two calls of the count hook: the counts' resolution."""

STUB = """
local s = { SUCCESS = 0, ERROR = -1, FAILURE = -1, NO_VAL = 4294967294, NO_VAL16 = 65534,
  NO_VAL8 = 254, INFINITE = 4294967295, JOB_SHARED_NONE = 0, JOB_SHARED_OK = 1 }
LOGS = { info = {}, debug = {}, error = {}, user = {} }
local function recorder(kind)
  return function(fmt, ...) table.insert(LOGS[kind], string.format(fmt, ...)) end
end
s.log_info, s.log_verbose, s.log_debug = recorder("info"), recorder("debug"), recorder("debug")
s.log_error, s.log_user = recorder("error"), recorder("user")
slurm = s
"""

MEASURE = """
-- Run fn(...) with the count hook on: instructions, budget spent?, ok, and the error or
-- the first two results. Past the budget the hook raises, and keeps raising until the
-- call has unwound (the script's own pcall catches the first one).
function MEASURE(budget, step, fn, ...)
  local count, over = 0, false
  local n, args = select("#", ...), { ... }
  debug.sethook(function()
    count = count + 1
    if count * step > budget then
      over = true
      error("instruction budget spent")
    end
  end, "", step)
  local ok, r1, r2 = pcall(fn, unpack(args, 1, n))
  debug.sethook()
  return count * step, over, ok, r1, r2
end
"""


@dataclass(frozen=True)
class Cost:
    instructions: int
    over_budget: bool
    ok: bool
    result: Any
    """The error (not ok), or the call's first result."""
    second: Any = None
    """The call's second result (e.g. the message beside a nil)."""


class CountedHook:
    """job_submit.lua (``script``, default: this checkout's) loaded with the node table at
    ``table_path`` (None: none) in a Lua 5.1 whose pattern matching is counted work
    (``ported``; False: the C built-ins, for wall times)."""

    def __init__(
        self,
        table_path: Path | None = None,
        *,
        script: str | None = None,
        ported: bool = True,
    ) -> None:
        self.lua = lua51.LuaRuntime(unpack_returned_tuples=True)
        if ported:
            port = self.lua.execute(PORT.read_text(encoding="utf-8"))
            g = self.lua.globals()
            for name in ("find", "match", "gmatch", "gsub"):
                g.string[name] = port[name]
        self.lua.execute(STUB)
        self.lua.globals().DEFRAG_NODES_FILE = str(table_path or "/nonexistent/defrag_nodes.lua")
        text = script if script is not None else (PLUGINS / "job_submit.lua").read_text("utf-8")
        self.lua.execute(text)
        self.lua.execute(MEASURE)
        self.g = self.lua.globals()
        self.d = self.g.slurm_defrag

    def table(self, fields: dict[str, Any]) -> Any:
        return self.lua.table_from(fields)

    def measure(self, budget: int, fn: Any, *args: Any) -> Cost:
        count, over, ok, res, second = self.g.MEASURE(budget, STEP, fn, *args)
        return Cost(int(count), bool(over), bool(ok), res, second)

    def logs(self, kind: str) -> list[str]:
        return [str(v) for v in self.g.LOGS[kind].values()]

    def forget_logs(self) -> None:
        self.lua.execute("for kind in pairs(LOGS) do LOGS[kind] = {} end")
