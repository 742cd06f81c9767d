"""``slurm-defrag plugins render``: slurm.conf reading, the table, its Lua text, and the
table working with job_submit.lua (run by a real Lua interpreter)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slurm_defrag.actuator.lua_table import lua_string, to_lua
from slurm_defrag.cli import app
from slurm_defrag.commands.plugins import RenderOptions, build_table, render_lua
from slurm_defrag.domain.topology import BUILTIN_TOPOLOGIES
from slurm_defrag.errors import InputError
from slurm_defrag.slurm.discovery.gres_conf import parse_gres_conf_links
from slurm_defrag.slurm.discovery.slurm_conf import parse_gres_field, parse_slurm_conf

from .plugins_support import PLUGINS, ROOT, require

COMPOSE = ROOT / "docker" / "slurm"
RECORDED = ROOT / "tests" / "fixtures" / "slurm-22.05" / "config"


def write(tmp: Path, name: str, text: str) -> Path:
    p = tmp / name
    p.write_text(text, encoding="utf-8")
    return p


def compose_conf(
    tmp: Path, extra_sched: str = ",ignore_prefer_validation", feature_on: str | None = None
) -> Path:
    """The compose cluster's slurm.conf, optionally with the flag the hint needs and the
    hint's feature (``defrag_partial``) on node ``feature_on``."""
    text = (COMPOSE / "slurm.conf").read_text(encoding="utf-8")
    lines = [
        line + extra_sched if line.startswith("SchedulerParameters=") else line
        for line in text.splitlines()
    ]
    if feature_on is not None:
        lines = [
            f"{line} Features=defrag_partial"
            if line.startswith(f"NodeName={feature_on} ")
            else line
            for line in lines
        ]
    return write(tmp, "slurm.conf", "\n".join(lines) + "\n")


# -- slurm.conf ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "total", "models"),
    [
        ("gpu:a100:8", 8, {"a100": 8}),
        ("gpu:8", 8, {}),
        ("gpu:a100-80g:8", 8, {"a100-80g": 8}),
        ("gpu:a100:4,gpu:v100:4", 8, {"a100": 4, "v100": 4}),
        ("gpu:a100:no_consume:2", 2, {"a100": 2}),
        ("gpu:no_consume:2", 2, {}),
        ("gpu:a100:1K", 1024, {"a100": 1024}),
        ("gpu:a100:8(S:0-1)", 8, {"a100": 8}),
        ("gres/gpu:h100:2", 2, {"h100": 2}),
        ("nic:2,gpu:h100:4", 4, {"h100": 4}),
        ("", 0, {}),
        ("(null)", 0, {}),
    ],
)
def test_gres_field(text: str, total: int, models: dict[str, int]) -> None:
    assert parse_gres_field(text, "x") == (total, models)


def test_gres_field_rejects_garbage() -> None:
    with pytest.raises(InputError, match="x: cannot read Gres"):
        parse_gres_field("gpu:a:b:c", "x")


def test_compose_slurm_conf() -> None:
    conf = parse_slurm_conf(COMPOSE / "slurm.conf")
    assert sorted(conf.nodes) == ["node01", "node02", "node03", "node04"]
    assert conf.nodes["node03"].models == {"a100-80g": 8}
    assert conf.nodes["node04"].gpus == 8
    assert set(conf.partitions) == {"batch", "high"}
    assert conf.partitions["batch"].nodes == ["node01", "node02", "node03", "node04"]
    assert conf.default_partition == "batch"
    assert "sched_interval=2" in conf.scheduler_parameters


def test_slurm_conf_syntax_we_rely_on(tmp_path: Path) -> None:
    write(tmp_path, "nodes.conf", "NodeName=gpu[3-4] Gres=gpu:l40s:4 Features=pcie\n")
    conf = write(
        tmp_path,
        "slurm.conf",
        """# comment
        schedulerparameters=bf_interval=5,ignore_prefer_validation
        NodeName=DEFAULT Sockets=2 Gres=gpu:a100:8
        NodeName=gpu[1-2] Features=fast,nvswitch \\
            RealMemory=1000   # continued line
        Include nodes.conf
        NodeName=cpu1 Gres=
        NodeSet=pcieset Feature=pcie
        PartitionName=DEFAULT State=UP
        PartitionName=a100 Nodes=gpu[1-2] Default=YES
        PartitionName=pcie Nodes=pcieset
        PartitionName=all Nodes=ALL
        PartitionName=mixed Nodes=gpu1,cpu1
        """,
    )
    parsed = parse_slurm_conf(conf)
    assert parsed.nodes["gpu1"].models == {"a100": 8}
    assert parsed.nodes["gpu1"].features == ("fast", "nvswitch")
    assert parsed.nodes["gpu3"].models == {"l40s": 4}
    assert parsed.nodes["cpu1"].gpus == 0
    assert parsed.partitions["pcie"].nodes == ["gpu3", "gpu4"]
    assert parsed.partitions["all"].nodes == ["gpu1", "gpu2", "gpu3", "gpu4", "cpu1"]
    assert parsed.partitions["mixed"].nodes == ["gpu1", "cpu1"]
    assert parsed.default_partition == "a100"
    assert "ignore_prefer_validation" in parsed.scheduler_parameters
    # CPUs and memory where slurm.conf gives them: none here but Sockets (no cores)
    assert parsed.nodes["gpu1"].memory_mb == 1000
    assert parsed.nodes["gpu1"].cpus is None
    assert parsed.nodes["gpu3"].memory_mb is None


def test_node_cpus_as_slurmctld_counts_them(tmp_path: Path) -> None:
    conf = write(
        tmp_path,
        "slurm.conf",
        """NodeName=DEFAULT Sockets=2 CoresPerSocket=16 ThreadsPerCore=2 RealMemory=64000
        NodeName=a1
        NodeName=b1 CPUs=12
        NodeName=c1 Boards=2 SocketsPerBoard=2 CoresPerSocket=4
        """,
    )
    parsed = parse_slurm_conf(conf)
    assert (parsed.nodes["a1"].cpus, parsed.nodes["a1"].memory_mb) == (64, 64000)
    assert parsed.nodes["b1"].cpus == 12
    assert parsed.nodes["c1"].cpus == 2 * 2 * 4 * 2  # ThreadsPerCore=2 from DEFAULT
    bad = write(tmp_path, "bad.conf", "NodeName=n1 RealMemory=64G\n")
    with pytest.raises(InputError, match=r"bad\.conf:1: node realmemory '64G'"):
        parse_slurm_conf(bad)


def test_slurm_conf_errors_name_the_place(tmp_path: Path) -> None:
    conf = write(tmp_path, "slurm.conf", "NodeName=n1 Gres=gpu:1\nPartitionName=p Nodes=n[1-2]\n")
    with pytest.raises(InputError, match=r"slurm\.conf:2: partition p: node n2 is not defined"):
        parse_slurm_conf(conf)
    with pytest.raises(InputError, match=r"cannot read slurm\.conf"):
        parse_slurm_conf(tmp_path / "missing.conf")


# -- the table -------------------------------------------------------------------------


def compose_table(
    tmp: Path, feature_on: str | None = "node03", **opts: object
) -> tuple[dict[str, object], list[str]]:
    """The compose cluster's table (node03 carrying the hint's feature: the hint is on)."""
    conf = parse_slurm_conf(compose_conf(tmp, feature_on=feature_on))
    topo = parse_gres_conf_links((COMPOSE / "gres.conf").read_text(encoding="utf-8"))
    return build_table(conf, topo, RenderOptions(**opts))  # type: ignore[arg-type]


def test_table_of_the_compose_cluster(tmp_path: Path) -> None:
    table, warnings = compose_table(tmp_path)
    assert warnings == []
    assert table["default_partition"] == "batch"
    assert table["slurm_user_uid"] == 0  # SlurmUser=root
    # node03 has the feature and is in both partitions
    assert table["pack"] == {
        "feature": "defrag_partial",
        "max_gpus": 4,
        "partitions": ["batch", "high"],
    }
    batch = table["partitions"]["batch"]  # type: ignore[index]
    by_hosts = {t["hosts"]: t for t in batch["types"]}
    assert by_hosts["node04"]["models"] == {"h100": 8}
    assert by_hosts["node04"]["max_block"] == 2
    assert by_hosts["node04"]["block_sizes"] == [1, 2]
    assert by_hosts["node[01-02]"]["block_sizes"] == list(range(1, 9))
    assert by_hosts["node[01-02]"]["nodes"] == 2
    assert by_hosts["node03"]["models"] == {"a100-80g": 8}


def test_dgx1_block_sizes_skip_five_to_seven(tmp_path: Path) -> None:
    conf = parse_slurm_conf(
        write(tmp_path, "slurm.conf", "NodeName=d1 Gres=gpu:v100:8\nPartitionName=p Nodes=d1\n")
    )
    table, _ = build_table(
        conf, {"d1": BUILTIN_TOPOLOGIES["dgx1-hybrid-cube-mesh"]}, RenderOptions(pack_feature=None)
    )
    (entry,) = table["partitions"]["p"]["types"]  # type: ignore[index]
    assert entry["block_sizes"] == [1, 2, 3, 4, 8]
    assert "pack" not in table


def test_unknown_topology_is_left_open_and_warned(tmp_path: Path) -> None:
    conf = parse_slurm_conf(
        write(
            tmp_path,
            "slurm.conf",
            "NodeName=g[1-2] Gres=gpu:l40s:4\nNodeName=one Gres=gpu:t4:1\n"
            "PartitionName=p Nodes=ALL\n",
        )
    )
    table, warnings = build_table(conf, {}, RenderOptions(pack_feature=None))
    types = {t["hosts"]: t for t in table["partitions"]["p"]["types"]}  # type: ignore[index]
    assert "block_sizes" not in types["g[1-2]"]
    assert types["one"]["block_sizes"] == [1]  # one GPU is always a block
    assert len(warnings) == 1
    assert "g[1-2]" in warnings[0]
    assert "never refused" in warnings[0]


def test_slurm_user_uid(tmp_path: Path) -> None:
    conf = parse_slurm_conf(write(tmp_path, "slurm.conf", "SlurmUser=no-such-user-here\n"))
    table, warnings = build_table(conf, {}, RenderOptions(pack_feature=None))
    assert table["slurm_user_uid"] is None
    assert any("no-such-user-here" in w for w in warnings)
    conf = parse_slurm_conf(write(tmp_path, "slurm.conf", "SlurmUser=64030\n"))
    assert build_table(conf, {}, RenderOptions(pack_feature=None))[0]["slurm_user_uid"] == 64030
    # A NUL byte (found by test_slurm_conf_bytes_fuzz): a warning, not getpwnam's ValueError.
    conf = parse_slurm_conf(write(tmp_path, "slurm.conf", "SlurmUser=\x00oot\n"))
    table, warnings = build_table(conf, {}, RenderOptions(pack_feature=None))
    assert table["slurm_user_uid"] is None
    assert any("SlurmUser" in w for w in warnings)


def test_service_user_reaches_the_table(tmp_path: Path) -> None:
    """--service-user: besides root and SlurmUser, the uid job_submit.lua lets put a job
    into a defrag-* reservation (a name is resolved on this host, digits are a uid)."""
    table, warnings = compose_table(tmp_path, service_user="root")
    assert table["service_uid"] == 0
    assert warnings == []
    table, _ = compose_table(tmp_path, service_user="2000")
    assert table["service_uid"] == 2000
    table, warnings = compose_table(tmp_path, service_user="no-such-user-here")
    assert table["service_uid"] is None  # left out of the file: root and SlurmUser only
    assert any("--service-user 'no-such-user-here' is unknown" in w for w in warnings)
    assert "service_uid" not in compose_table(tmp_path)[0]


def test_gpu_count_mismatch_is_an_error(tmp_path: Path) -> None:
    conf = parse_slurm_conf(
        write(tmp_path, "slurm.conf", "NodeName=n1 Gres=gpu:a100:4\nPartitionName=p Nodes=n1\n")
    )
    with pytest.raises(InputError, match="topology of n1: 'nvswitch-8' has 8 GPUs"):
        build_table(conf, {"n1": BUILTIN_TOPOLOGIES["nvswitch-8"]}, RenderOptions())


def test_the_hint_names_a_feature_only_where_a_node_has_it(tmp_path: Path) -> None:
    """The cause of the BadConstraints reason (issue #41): the hint named defrag_partial,
    which no node has and nothing sets. Now the table names it only with the partitions
    whose nodes have it in slurm.conf, and leaves it out (saying why) when none does."""
    table, warnings = compose_table(tmp_path, feature_on=None)
    assert "pack" not in table
    (w,) = warnings
    assert "no node in slurm.conf has the feature defrag_partial" in w
    assert "BadConstraints" in w
    conf = write(
        tmp_path,
        "two.conf",
        "SchedulerParameters=ignore_prefer_validation\n"
        "NodeName=a1 Gres=gpu:a100:8 Features=fast,defrag_partial\n"
        "NodeName=b1 Gres=gpu:a100:8\n"
        "PartitionName=a Nodes=a1\nPartitionName=b Nodes=b1\nPartitionName=ab Nodes=ALL\n",
    )
    table, _ = build_table(parse_slurm_conf(conf), {}, RenderOptions())
    assert table["pack"] == {"feature": "defrag_partial", "max_gpus": 4, "partitions": ["a", "ab"]}


def test_packing_needs_ignore_prefer_validation(tmp_path: Path) -> None:
    conf = parse_slurm_conf(compose_conf(tmp_path, extra_sched=""))
    table, warnings = build_table(conf, {}, RenderOptions())
    assert "pack" not in table
    assert any("ignore_prefer_validation" in w for w in warnings)


def test_options_reach_the_table(tmp_path: Path) -> None:
    table, _ = compose_table(
        tmp_path, enforce=False, allow_protect=False, pack_max_gpus=2, pack_feature="small_ok"
    )
    assert table["enforce"] is False
    assert table["allow_protect"] is False
    assert "pack" not in table  # no node has small_ok
    table, _ = compose_table(tmp_path, pack_max_gpus=2)
    assert table["pack"] == {
        "feature": "defrag_partial",
        "max_gpus": 2,
        "partitions": ["batch", "high"],
    }
    with pytest.raises(InputError, match="not a plain node feature name"):
        compose_table(tmp_path, pack_feature="a|b")


def test_short_first_and_node_shapes_reach_the_table(tmp_path: Path) -> None:
    # the compose cluster's weights: QOS 10,000 and age 1,000; 10 % of that is the cap
    bound = {"cap": 1100, "cap_share": 0.1, "range": 11000, "weights": "Age=1000,QOS=10000"}
    table, _ = compose_table(tmp_path, short_first=0.25)
    assert table["short_first"] == {"share": 0.25, "span": 10080} | bound
    table, _ = compose_table(tmp_path, short_first=0.1, short_first_all=True, large_first=4)
    assert (
        table["short_first"]
        == {
            "share": 0.1,
            "span": 10080,
            "all": True,
            "large_gpus": 4,
        }
        | bound
    )
    table, _ = compose_table(tmp_path, short_first=0.1, boost_cap=0.25)
    assert table["short_first"]["cap"] == 2750  # type: ignore[index]
    with pytest.raises(InputError, match=r"--boost-cap: 1\.5 is not a share"):
        compose_table(tmp_path, short_first=0.1, boost_cap=1.5)
    with pytest.raises(InputError, match="--large-first: 0 is not a GPU count"):
        compose_table(tmp_path, short_first=0.1, large_first=0)
    with pytest.raises(InputError, match="need --short-first"):
        compose_table(tmp_path, short_first_all=True)
    batch = table["partitions"]["batch"]  # type: ignore[index]
    assert {(t["cpus"], t["mem"]) for t in batch["types"]} == {(32, 64000)}
    assert "short_first" not in compose_table(tmp_path)[0]
    with pytest.raises(InputError, match="--short-first: 0 is not a share"):
        compose_table(tmp_path, short_first=0)


# -- Lua text --------------------------------------------------------------------------


def test_lua_strings_are_escaped() -> None:
    assert lua_string('a"b\\c') == '"a\\"b\\\\c"'
    assert lua_string("é\n") == '"\\195\\169\\010"'


def test_lua_keys_that_are_not_names_are_bracketed() -> None:
    assert to_lua({"a100-80g": 8, "end": 1, "ok_1": True, "skip": None}) == (
        '{ ["a100-80g"] = 8, ["end"] = 1, ok_1 = true }'
    )
    assert to_lua({"k": [1, 2]}) == "{\n  k = { 1, 2 },\n}"


LUA_EVAL = """
local t = dofile(arg[1])
local function dump(v)
  if type(v) ~= "table" then return v end
  local o = {}
  for k, x in pairs(v) do o[k] = dump(x) end
  return o
end
-- a tiny JSON writer is enough for numbers, strings, booleans and tables
local function json(v)
  local ty = type(v)
  if ty == "table" then
    if #v > 0 or next(v) == nil then
      local parts = {}
      for _, x in ipairs(v) do table.insert(parts, json(x)) end
      if #parts > 0 or next(v) == nil then return "[" .. table.concat(parts, ",") .. "]" end
    end
    local parts = {}
    for k, x in pairs(v) do table.insert(parts, string.format("%q:%s", tostring(k), json(x))) end
    return "{" .. table.concat(parts, ",") .. "}"
  elseif ty == "string" then return string.format("%q", v)
  else return tostring(v) end
end
print(json(dump(t)))
"""


def lua_bin() -> str:
    lua = shutil.which("lua5.1")
    require(lua is not None, "lua5.1 (Debian package lua5.1)")
    assert lua is not None
    return lua


def test_rendered_file_loads_in_lua_with_the_same_content(tmp_path: Path) -> None:
    table, _ = compose_table(tmp_path)
    out = write(tmp_path, "defrag_nodes.lua", render_lua(table, ["test"]))
    script = write(tmp_path, "eval.lua", LUA_EVAL)
    proc = subprocess.run(
        [lua_bin(), str(script), str(out)], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = json.loads(proc.stdout)
    # empty Lua tables come back as lists; compare what matters
    assert loaded["pack"] == table["pack"]
    assert loaded["partitions"]["batch"]["types"][2]["block_sizes"] == [1, 2]
    assert loaded["default_partition"] == "batch"


# -- the table driving job_submit.lua ---------------------------------------------------

LUA_SUBMIT = """
local NO_VAL, NO_VAL16 = 4294967294, 65534
slurm = { SUCCESS = 0, ERROR = -1, NO_VAL = NO_VAL, NO_VAL16 = NO_VAL16, user = {} }
local function fmt(f, ...) return string.format(f, ...) end
slurm.log_info = function(f, ...) fmt(f, ...) end
slurm.log_debug = slurm.log_info
slurm.log_error = function(f, ...) io.stderr:write(fmt(f, ...), "\\n") end
slurm.log_user = function(f, ...) table.insert(slurm.user, fmt(f, ...)) end
DEFRAG_NODES_FILE = arg[2]
dofile(arg[1])
for i = 3, #arg do
  local jd = { tres_per_node = arg[i], min_nodes = NO_VAL, max_nodes = NO_VAL,
               num_tasks = NO_VAL, shared = NO_VAL16, name = "t", user_id = 1 }
  slurm.user = {}
  local rc = slurm_job_submit(jd, {}, 1)
  print(string.format("%s|%s|%s|%s", arg[i], rc, tostring(jd.admin_comment),
    tostring(jd.prefer) .. "|" .. (slurm.user[1] or "")))
end
"""


def test_render_cli_output_drives_job_submit(tmp_path: Path) -> None:
    out = tmp_path / "defrag_nodes.lua"
    write(tmp_path, "job_submit.lua", "-- stand-in, to be touched\n")
    (tmp_path / "job_submit.lua").touch()
    before = (tmp_path / "job_submit.lua").stat().st_mtime_ns
    result = CliRunner().invoke(
        app,
        [
            "plugins",
            "render",
            "--slurm-conf",
            str(compose_conf(tmp_path, feature_on="node03")),
            "--gres-conf",
            str(COMPOSE / "gres.conf"),
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "packing hint on" in result.output
    assert "touched" in result.output
    assert (tmp_path / "job_submit.lua").stat().st_mtime_ns >= before

    driver = write(tmp_path, "drive.lua", LUA_SUBMIT)
    proc = subprocess.run(
        [
            lua_bin(),
            str(driver),
            str(PLUGINS / "job_submit.lua"),
            str(out),
            "gres:gpu:4",
            "gres/gpu:h100:2",
            "gres/gpu:h100:4",
            "gres:gpu:8",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    rows = {r.split("|")[0]: r.split("|")[1:] for r in proc.stdout.splitlines()}
    assert rows["gres:gpu:4"][:3] == [
        "0",
        "defrag:nvlink=4 defrag:gpn=4 defrag:nodes=1",
        "defrag_partial",
    ]
    assert rows["gres/gpu:h100:2"][0] == "0"
    assert rows["gres/gpu:h100:4"][0] == "2072"
    assert "NVLink blocks of at most 2 GPUs" in rows["gres/gpu:h100:4"][3]
    assert rows["gres:gpu:8"][:3] == ["0", "defrag:nvlink=8 defrag:gpn=8 defrag:nodes=1", "nil"]
    assert proc.stderr == ""


def test_render_to_stdout_from_the_recorded_22_05_config() -> None:
    result = CliRunner().invoke(
        app,
        [
            "plugins",
            "render",
            "--slurm-conf",
            str(RECORDED / "slurm.conf"),
            "--gres-conf",
            str(RECORDED / "gres.conf"),
            "--no-pack",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("-- defrag_nodes.lua")
    assert '["a100-80g"] = 8' in result.stdout


def test_render_topology_map(tmp_path: Path) -> None:
    conf = write(
        tmp_path,
        "slurm.conf",
        "NodeName=p[1-2] Gres=gpu:h100:8\nPartitionName=p Nodes=ALL Default=YES\n",
    )
    tmap = write(tmp_path, "map.json", json.dumps({"p[1-2]": "nvlink-pairs-8"}))
    result = CliRunner().invoke(
        app,
        [
            "plugins",
            "render",
            "--slurm-conf",
            str(conf),
            "--topology-map",
            str(tmap),
            "--no-pack",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "block_sizes = { 1, 2 }" in result.stdout
    bad = write(tmp_path, "bad.json", json.dumps({"p1": "no-such-template"}))
    result = CliRunner().invoke(
        app,
        [
            "plugins",
            "render",
            "--slurm-conf",
            str(conf),
            "--topology-map",
            str(bad),
        ],
    )
    assert result.exit_code != 0
    assert "unknown topology template 'no-such-template'" in str(result.exception or result.output)


def test_render_finds_the_gres_conf_beside_slurm_conf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the service does: no --gres-conf, no setting -> Slurm's own gres.conf."""
    monkeypatch.delenv("SLURM_DEFRAG_SLURM_GRES_CONF", raising=False)
    conf = compose_conf(tmp_path)
    (conf.parent / "gres.conf").write_text(
        (COMPOSE / "gres.conf").read_text(encoding="utf-8"), encoding="utf-8"
    )

    def render(*extra: str) -> str:
        result = CliRunner().invoke(
            app, ["plugins", "render", "--slurm-conf", str(conf), "--no-touch", *extra]
        )
        assert result.exit_code == 0, result.output
        # without the time stamp: two renders may fall in different seconds
        return "\n".join(line for line in result.stdout.splitlines() if "generated_at" not in line)

    assert render() == render("--gres-conf", str(conf.parent / "gres.conf"))
    assert "nvlink" in render()


def test_the_route_file_is_named_in_the_table_and_read_by_the_doctor(tmp_path: Path) -> None:
    from slurm_defrag.commands.doctor_checks import _ROUTE_FILE

    path = Path("/var/lib/slurm-defrag/route/defrag_route.lua")
    table, _ = compose_table(tmp_path, route_file=path)
    assert table["route_file"] == str(path)
    text = render_lua(table, ["slurm.conf"])
    m = _ROUTE_FILE.search(text)
    assert m is not None
    assert m[1] == str(path)
    assert "route_file" not in compose_table(tmp_path)[0]
    with pytest.raises(InputError, match=r"--route-file: 'route\.lua' must be an absolute path"):
        compose_table(tmp_path, route_file=Path("route.lua"))
    conf = parse_slurm_conf(compose_conf(tmp_path, extra_sched=""))
    with pytest.raises(InputError, match=r"--route-file: slurm\.conf has no SchedulerParameters"):
        build_table(conf, {}, RenderOptions(route_file=path))


def test_keep_scarce_marks_big_variants_of_common_nodes() -> None:
    """mark_kept: a type whose whole shape few nodes hold, beside a common type with as
    many GPUs; never a model of its own, never a type without CPUs or memory."""
    from slurm_defrag.packing.node_levers import mark_kept

    types: list[dict[str, object]] = [
        {"gpus": 8, "nodes": 18, "cpus": 96, "mem": 393216, "hosts": "a[1-18]"},
        {"gpus": 8, "nodes": 1, "cpus": 128, "mem": 786432, "hosts": "big1"},
        {"gpus": 8, "nodes": 1, "hosts": "unknown1"},  # no CPUs/memory: never kept
        {"gpus": 4, "nodes": 1, "cpus": 256, "mem": 2_000_000, "hosts": "fat4"},  # 4 alone
        {"gpus": 0, "nodes": 40, "cpus": 256, "mem": 2_000_000, "hosts": "cpu[1-40]"},
    ]
    assert mark_kept(types, 0.1) == ["big1"]
    assert [t.get("kept", False) for t in types] == [False, True, False, False, False]


def test_keep_scarce_option(tmp_path: Path) -> None:
    table, warnings = compose_table(tmp_path, short_first=0.1, keep_scarce=0.5)
    assert table["short_first"] == {
        "share": 0.1,
        "span": 10080,
        "cap": 1100,
        "cap_share": 0.1,
        "range": 11000,
        "weights": "Age=1000,QOS=10000",
        "keep": {"demand": 0.5, "window": 360},
    }
    assert any("--keep-scarce" in w and "no node" in w for w in warnings)  # four alike
    with pytest.raises(InputError, match="--keep-scarce need --short-first"):
        compose_table(tmp_path, keep_scarce=0.0)
    with pytest.raises(InputError, match="--keep-scarce: -1 is not a demand"):
        compose_table(tmp_path, short_first=0.1, keep_scarce=-1)
