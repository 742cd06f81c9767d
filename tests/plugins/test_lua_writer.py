"""Issue #15, ``plugins render``: the Lua table writer escapes everything it writes.

``defrag_nodes.lua`` runs inside slurmctld. Before the fix the source paths went into a
``--`` comment as they were: a path with a newline ended the comment and the rest of the
path ran as Lua. Every value here is rendered, run by a real Lua (5.1 is what Debian's
Slurm links, 5.4 for newer sites; offline) and must come back byte for byte, with nothing
executed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slurm_defrag.actuator.lua_table import lua_string
from slurm_defrag.cli import app
from slurm_defrag.commands.plugins import parse_slurm_conf, render_lua
from slurm_defrag.errors import InputError

from .plugins_support import require

HOSTILE = [
    "plain",
    "",
    'quote " and \\ backslash',
    "new\nline",
    "cr\rlf\r\n",
    "]]",
    "]=]",
    "[[x]]",
    "--[[ comment",
    "\x00nul",
    "\x1b[31mred",
    "\x7f",
    "tab\t",
    "é ü 中文 🚀",
    "\\0651",
    "\\",
    '\\\\"',
    "%s %d",
    "'single'",
    'x"; os.exit(3) --',
    "\nos.exit(3)\n",
    "\\ddd\\123\\",
    "".join(chr(i) for i in range(128)),
    "\udcff\udc80 non-UTF-8 bytes of a path",
]

# Prints each string of the table's `v` list as hex bytes, one per line; `ran` is set
# only if injected code executed.
DUMP = """
local t = dofile(arg[1])
local function hex(s)
  return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end
for i = 1, #t.v do print(hex(t.v[i])) end
for k, v in pairs(t.k) do print("k:" .. hex(k) .. "=" .. hex(v)) end
print("ran:" .. tostring(ran))
"""


def _luas() -> list[str]:
    return [lua for lua in ("lua5.1", "lua5.4") if shutil.which(lua)]


def _run(lua: str, tmp: Path, text: str) -> list[str]:
    f = tmp / "t.lua"
    f.write_bytes(text.encode("ascii"))  # the writer only emits ASCII
    d = tmp / "dump.lua"
    d.write_text(DUMP, encoding="utf-8")
    proc = subprocess.run(
        [lua, str(d), str(f)], capture_output=True, text=True, timeout=30, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def _bytes(s: str) -> str:
    return s.encode("utf-8", "surrogateescape").hex()


@pytest.mark.parametrize("lua", ["lua5.1", "lua5.4"])
def test_hostile_strings_round_trip_exactly(tmp_path: Path, lua: str) -> None:
    require(shutil.which(lua) is not None, f"{lua} (Debian package {lua})")
    text = render_lua({"v": HOSTILE, "k": {s: s for s in HOSTILE if s}}, HOSTILE)
    assert text.isascii()
    assert all(
        line.startswith(("--", "return", " ", "}")) or not line for line in text.splitlines()
    )
    out = _run(lua, tmp_path, text)
    assert out[: len(HOSTILE)] == [_bytes(s) for s in HOSTILE]
    keys = {line for line in out if line.startswith("k:")}
    assert keys == {f"k:{_bytes(s)}={_bytes(s)}" for s in HOSTILE if s}
    assert out[-1] == "ran:nil"


@pytest.mark.parametrize("lua", ["lua5.1", "lua5.4"])
def test_a_source_path_cannot_run_code(tmp_path: Path, lua: str) -> None:
    """Defect (#15): ``-- Sources: <path>`` with a newline in the path ran the rest of the
    path in slurmctld."""
    require(shutil.which(lua) is not None, f"{lua} (Debian package {lua})")
    evil = "/etc/slurm/x\nran = true\nlocal _ = [[\n"
    text = render_lua({"v": ["ok"], "k": {}}, [evil, "/tmp/a\r-- b"])
    out = _run(lua, tmp_path, text)
    assert out == ["6f6b", "ran:nil"]


def test_lua_string_is_printable_ascii_and_unambiguous() -> None:
    assert lua_string("\x01" + "2") == '"\\0012"'  # three digits: "2" stays a character
    assert lua_string("\n") == '"\\010"'
    for s in HOSTILE:
        lit = lua_string(s)
        assert lit.isascii()
        assert lit.isprintable()


@pytest.mark.parametrize(
    ("line", "what"),
    [
        ('NodeName="gpu\\x01" Gres=gpu:2', "node name"),
        ("NodeName=gpu]x Gres=gpu:2", "bad host list|node name"),
        ('NodeName=gpu1 Gres=gpu:"a]]b":2', "GPU type"),
        ('PartitionName="p\\"q" Nodes=gpu1', "partition name"),
        ("PartitionName=p;os.exit() Nodes=gpu1", "partition name"),
    ],
)
def test_names_written_to_lua_are_validated(tmp_path: Path, line: str, what: str) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("NodeName=gpu1 Gres=gpu:2\n" + line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=what):
        parse_slurm_conf(conf)


def test_render_cli_with_a_hostile_path(tmp_path: Path) -> None:
    """Through the command: the path the admin passes is written escaped."""
    odd = tmp_path / "we\nird]]"
    odd.mkdir()
    conf = odd / "slurm.conf"
    conf.write_text(
        "NodeName=g[1-2] Gres=gpu:h100:2\nPartitionName=p Nodes=ALL Default=YES\n", encoding="utf-8"
    )
    result = CliRunner().invoke(app, ["plugins", "render", "--slurm-conf", str(conf), "--no-pack"])
    assert result.exit_code == 0, result.output
    header = [line for line in result.stdout.splitlines() if line.startswith("-- Sources:")]
    assert header == [f"-- Sources: {lua_string(str(conf))}"]
    assert "we\\010ird]]" in header[0]
    for lua in _luas():
        f = tmp_path / "t.lua"
        f.write_text(result.stdout, encoding="ascii")
        proc = subprocess.run(
            [
                lua,
                "-e",
                f"t = dofile({lua_string(str(f))}) "
                "assert(t.partitions.p.types[1].hosts == 'g[1-2]')",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
