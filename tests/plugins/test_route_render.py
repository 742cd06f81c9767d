"""The route entry (fgd-route levers) as Python writes it is what job_submit.lua accepts:
rendered by the table writer, loaded by a real Lua through the script's own loader."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from slurm_defrag.actuator.lua_table import to_lua
from slurm_defrag.commands.plugins import render_lua
from slurm_defrag.domain.cluster import ClusterSnapshot, Node
from slurm_defrag.packing.fit_classes import Mix, TaskClass
from slurm_defrag.packing.node_levers import LeverSettings, compute_levers
from slurm_defrag.synth import EPOCH

from .plugins_support import PLUGINS, require

SUBMIT = """
package.path = "./?.lua;" .. package.path
local H = require("tests.helper")
local s = H.load(arg[1])
for _, e in ipairs(s.logs.error) do print("error: " .. e) end
local _, jd = H.submit({ tres_per_node = arg[2], min_cpus = 2 })
print("prefer: " .. tostring(jd.prefer))
"""


def _node(name: str, used: int, **more: object) -> Node:
    return Node.model_validate(
        more
        | {
            "name": name,
            "partitions": ("batch",),
            "state": frozenset({"MIXED" if used else "IDLE"}),
            "gpu_model": "a100",
            "gpu_count": 4,
            "gpus_used": frozenset(range(used)),
            "cpus": 32,
            "cpus_alloc": 4 * used,
            "memory_mb": 64000,
        }
    )


@pytest.mark.parametrize("lua", ["lua5.1", "lua5.4"])
@pytest.mark.parametrize("lever", ["fgd-route", "fgd-route-score"])
def test_rendered_route_table_loads_and_routes(tmp_path: Path, lua: str, lever: str) -> None:
    require(shutil.which(lua) is not None, f"{lua} (Debian package {lua})")
    mix = Mix((TaskClass(2, 1, 1000, 0.6), TaskClass(4, 2, 1000, 0.25), TaskClass(1, 1, 250, 0.15)))
    snap = ClusterSnapshot(taken_at=EPOCH, nodes=(_node("gpu-a", 0), _node("gpu-b", 1)))
    route = compute_levers(snap, LeverSettings(lever, mix=mix)).route
    assert route is not None
    # gpu-b runs a 1-GPU job: a 3-GPU job fills it exactly, where on gpu-a it would strand
    # a GPU no 2-GPU job can use
    assert _submit(tmp_path, route, lua, "gres:gpu:3") == ["prefer: defrag_at_gpu_b"]


def _submit(tmp_path: Path, route: object, lua: str, tres: str) -> list[str]:
    """What job_submit.lua prefers (SUBMIT's output) for one job asking ``tres``, with
    ``route`` rendered into a two-node table."""
    table = {
        "version": 1,
        "default_partition": "batch",
        "partitions": {"batch": {"types": [{"gpus": 4, "nodes": 2, "models": {"a100": 4}}]}},
        "route": route,
    }
    path = tmp_path / "defrag_nodes.lua"
    path.write_text(render_lua(table, ["test"]), encoding="ascii")
    script = tmp_path / "submit.lua"
    script.write_text(SUBMIT, encoding="utf-8")
    proc = subprocess.run(
        [lua, str(script), str(path), tres],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        cwd=PLUGINS,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_floats_are_written_as_lua_numbers_and_non_finite_ones_refused() -> None:
    assert to_lua({"step": 40.0, "w": 1e-05}) == "{ step = 40.0, w = 1e-05 }"
    with pytest.raises(TypeError, match="nan"):
        to_lua(float("nan"))


def test_a_shard_request_is_routed_only_to_a_node_with_shards(tmp_path: Path) -> None:
    """A real cluster's shards per GPU (here 4) reach the script, which sends a share only
    where Slurm can place it: gpu-a, in use (where FGD would pack it), has no shard GRES;
    gpu-b, idle, has."""
    require(shutil.which("lua5.4") is not None, "lua5.4 (Debian package lua5.4)")
    # 4-GPU jobs: FGD would keep gpu-b whole and put the share beside gpu-a's job
    mix = Mix((TaskClass(2, 4, 1000, 0.5), TaskClass(1, 1, 500, 0.5)))
    shared = _node("gpu-b", 0, shards=16, gpu_milli_used=(0, 0, 0, 0))
    snap = ClusterSnapshot(taken_at=EPOCH, nodes=(_node("gpu-a", 1), shared))
    assert snap.shards_per_gpu == 4
    route = compute_levers(snap, LeverSettings("fgd-route-score", mix=mix)).route
    assert route is not None
    assert route["shards_per_gpu"] == 4
    entries = {n["feature"]: n for n in route["nodes"]}  # type: ignore[attr-defined]
    assert entries["defrag_at_gpu_a"]["no_shards"] is True
    assert "no_shards" not in entries["defrag_at_gpu_b"]
    assert entries["defrag_at_gpu_b"]["free"] == [1000] * 4
    assert _submit(tmp_path, route, "lua5.4", "gres/shard:2") == ["prefer: defrag_at_gpu_b"]
