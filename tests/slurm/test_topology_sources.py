"""Topology sources (issue #19): each node records where its topology came from, and a GPU
node that no source covers is *unknown*, never silently PCIe.

Precedence: gres.conf (setting, else found beside slurm.conf) > topology_map > topology_dir
> topology_templates.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.errors import InputError
from slurm_defrag.slurm.cli_backend import CliSlurm, slurm_conf_dir
from slurm_defrag.slurm.connection import SlurmSettings
from slurm_defrag.slurm.discovery.gres_conf import from_links_matrix, parse_gres_conf_links
from slurm_defrag.slurm.discovery.topology_sources import (
    GresConfText,
    read_collector_file,
    read_topology_dir,
    read_topology_map,
    resolve,
    topology_report,
    unknown_topology_warning,
)
from slurm_defrag.slurm.failures import SlurmParseError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm-22.05"
TAKEN = datetime(2026, 1, 1, tzinfo=UTC)

ALL8 = [[-1 if i == j else 12 for j in range(8)] for i in range(8)]
PAIRS8 = [[-1 if i == j else (12 if i // 2 == j // 2 else 0) for j in range(8)] for i in range(8)]
CONFIG = "SLURM_CONF              = /etc/slurm/slurm.conf\nSLURM_VERSION = 22.05.8\n"
GRES = (FIXTURES / "config" / "gres.conf").read_text(encoding="utf-8")


def collector(tmp: Path, name: str, links: Any = ALL8, **over: Any) -> Path:
    doc = {
        "format": "slurm-defrag-topology/1",
        "node": name,
        "gpus": 8,
        "links": links,
        "tool": "nvidia-smi topo -m",
        "collected_at": "2026-12-02T10:00:00Z",
        **over,
    }
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


# -- names ---------------------------------------------------------------------------------


def test_links_topologies_are_named_after_their_graph_not_a_node() -> None:
    assert from_links_matrix(ALL8).name == "nvlink-8-all"
    assert from_links_matrix(PAIRS8).name == "nvlink-8-pairs"
    assert from_links_matrix([[-1, 0], [0, -1]]).name == "nvlink-2-none"
    ring = [[-1, 1, 0, 1], [1, -1, 1, 0], [0, 1, -1, 1], [1, 0, 1, -1]]
    other = [[-1, 1, 1, 0], [1, -1, 0, 1], [1, 0, -1, 1], [0, 1, 1, -1]]
    a, b = from_links_matrix(ring).name, from_links_matrix(other).name
    assert a.startswith("nvlink-4-")
    assert b.startswith("nvlink-4-")
    assert a != b  # unique per graph
    assert from_links_matrix(ring).name == a  # stable
    # link counts are not the graph: 12 or 18 NVLinks per pair is one topology
    assert from_links_matrix([[-1 if i == j else 18 for j in range(8)] for i in range(8)]) == (
        from_links_matrix(ALL8)
    )


# -- precedence -----------------------------------------------------------------------------


def test_precedence_gres_conf_then_map_then_collector_then_templates(tmp_path: Path) -> None:
    gres = tmp_path / "gres.conf"
    gres.write_text(
        "\n".join(
            f"NodeName=n1 Name=gpu File=/dev/nvidia{i} Links={','.join(map(str, row))}"
            for i, row in enumerate(PAIRS8)
        ),
        encoding="utf-8",
    )
    tmap = tmp_path / "map.yaml"
    tmap.write_text(
        "nodes:\n  n[1-2]: {template: nvswitch-8}\n  n5: {links: " + json.dumps(PAIRS8) + "}\n",
        encoding="utf-8",
    )
    tdir = tmp_path / "collected"
    tdir.mkdir()
    for node in ("n1", "n2", "n3"):
        collector(tdir, node)
    settings = SlurmSettings(
        gres_conf=gres,
        topology_map=tmap,
        topology_dir=tdir,
        topology_templates={"n[1-4]": "dgx1-hybrid-cube-mesh"},
    )
    found = resolve(settings)
    assert {n: f.source for n, f in found.items()} == {
        "n1": "gres.conf",
        "n2": "map",
        "n5": "map",
        "n3": "collector",
        "n4": "template",
    }
    assert found["n1"].topology.name == "nvlink-8-pairs"
    assert found["n2"].topology.name == "nvswitch-8"
    assert found["n3"].topology.name == "nvlink-8-all"
    assert found["n4"].topology.name == "dgx1-hybrid-cube-mesh"


def test_the_gres_conf_setting_wins_over_the_discovered_one(tmp_path: Path) -> None:
    gres = tmp_path / "gres.conf"
    gres.write_text("", encoding="utf-8")  # explicit and empty: discovery is not used
    found = resolve(SlurmSettings(gres_conf=gres), GresConfText("found", GRES))
    assert found == {}
    assert len(resolve(SlurmSettings(), GresConfText("found", GRES))) == 8


# -- map and collector: bad input is one line naming the file and the field ---------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "expected one key 'nodes'"),
        ('{"nodes": {"n1": {"template": "nope"}}}', "nodes.n1.template: unknown template 'nope'"),
        ('{"nodes": {"n1": {"links": [[-1, 1], [2, -1]]}}}', "nodes.n1.links: Links not symm"),
        ('{"nodes": {"n1": {"links": [[-1, "x"], [1, -1]]}}}', "nodes.n1.links: Links row 0"),
        ('{"nodes": {"n1": {"links": 3}}}', "nodes.n1.links: expected a list of rows"),
        ('{"nodes": {"n1": {}}}', "nodes.n1: expected {template: NAME} or {links: ROWS}"),
        ('{"nodes": {"n[1": {"template": "nvswitch-8"}}}', "nodes.n[1"),
        (
            '{"nodes": {"n[1-2]": {"template": "nvswitch-8"}, "n2": {"template": "nvswitch-8"}}}',
            "nodes.n2: node n2 is already named by an entry",
        ),
        ("nodes: [", "not YAML or JSON"),
    ],
)
def test_bad_topology_map(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "map.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as exc:
        read_topology_map(path)
    assert str(exc.value).startswith(f"{path}: ")
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"format": "other/2"}, "format: expected 'slurm-defrag-topology/1'"),
        ({"node": "node02"}, "node: must be the file's name without .json ('node01')"),
        ({"gpus": 0}, "gpus: expected a positive integer"),
        ({"gpus": 4}, "links: 8 rows for gpus=4"),
        ({"links": None}, "links: expected a list of rows"),
        ({"links": [[-1, 1], [0, -1]]}, "links: Links not symmetric between GPU 0 and GPU 1"),
        ({"links": [[0]]}, "links: Links row 0: entry 0 must be -1"),
    ],
)
def test_bad_collector_file(tmp_path: Path, over: dict[str, Any], message: str) -> None:
    path = collector(tmp_path, "node01", **over)
    with pytest.raises(InputError) as exc:
        read_collector_file(path)
    assert str(exc.value).startswith(f"{path}: {message}")


def test_a_bad_collector_file_leaves_its_node_unknown_not_the_read_failed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import os

    collector(tmp_path, "node02", PAIRS8)
    (tmp_path / "node01.json").write_text("{", encoding="utf-8")
    os.mkfifo(tmp_path / "node03.json")  # would block an open() forever
    assert set(read_topology_dir(tmp_path)) == {"node02"}
    assert "node01.json: not JSON (line 1" in caplog.text
    assert "node03.json: not a regular file" in caplog.text
    with pytest.raises(InputError, match="cannot read topology_dir"):
        read_topology_dir(tmp_path / "nope")


def test_a_gpu_count_mismatch_is_a_config_error_only_where_the_admin_named_it() -> None:
    from builders import node
    from slurm_defrag.slurm.discovery.topology_sources import Found
    from slurm_defrag.slurm.snapshot_assembly import _checked

    n8 = node("node01", gpu_count=8)
    four = Found(from_links_matrix(["-1,1,1,1", "1,-1,1,1", "1,1,-1,1", "1,1,1,-1"], "x"), "map")
    with pytest.raises(InputError, match="node01 \\(from map\\): 4 GPUs, Slurm reports 8"):
        _checked(n8, four)
    reported = Found(four.topology, "collector", data=True)
    assert _checked(n8, reported) is None  # left unknown, with a warning


def test_collector_directory_ignores_other_files(tmp_path: Path) -> None:
    collector(tmp_path, "node01", PAIRS8)
    (tmp_path / "README").write_text("not a topology", encoding="utf-8")
    assert {n: t.name for n, t in read_topology_dir(tmp_path).items()} == {
        "node01": "nvlink-8-pairs"
    }


# -- the cli backend finds gres.conf beside slurm.conf ---------------------------------------


def cli(runner: Any, **settings: Any) -> CliSlurm:
    return CliSlurm(SlurmSettings(**settings), runner=runner, clock=lambda: TAKEN)


def test_cli_discovers_gres_conf_through_the_command_prefix(recordings: SimpleNamespace) -> None:
    prefix = ["docker", "exec", "ctld"]
    runner = recordings.ReplayRunner(
        "22.05",
        {
            "docker exec ctld scontrol show config": CONFIG,
            "docker exec ctld cat -- /etc/slurm/gres.conf": GRES,
        },
    )
    # the replay keys on argv without the prefix for recorded commands: strip it
    inner = recordings.ReplayRunner("22.05", runner.overrides)

    def with_prefix(argv: Any, timeout_s: float) -> Any:
        assert list(argv[:3]) == prefix, argv
        line = " ".join(argv)
        return inner(argv if line in runner.overrides else argv[3:], timeout_s)

    backend = cli(with_prefix, command_prefix=prefix)
    snap = backend.snapshot()
    gpu_nodes = [n for n in snap.nodes if n.gpu_count]
    assert gpu_nodes
    assert all(n.topology_source == "gres.conf" for n in gpu_nodes)
    assert snap.unknown_topology_nodes == ()
    backend.snapshot()  # the config directory is learnt once, the file read every time
    assert sum("config" in c for c in inner.calls) == 1
    assert sum("cat" in c for c in inner.calls) == 2


def test_cli_without_gres_conf_shows_unknown_not_pcie(recordings: SimpleNamespace) -> None:
    runner = recordings.ReplayRunner(
        "22.05",
        {
            "scontrol show config": CONFIG,
            "cat -- /etc/slurm/gres.conf": (1, "", "cat: /etc/slurm/gres.conf: No such file"),
        },
    )
    snap = cli(runner).snapshot()
    gpu_nodes = [n.name for n in snap.nodes if n.gpu_count]
    assert snap.unknown_topology_nodes == tuple(gpu_nodes)
    assert all(n.topology is None and n.topology_source is None for n in snap.nodes)
    assert {snap.topology_of(n).name for n in snap.nodes if n.gpu_count} == {"unknown"}
    assert snap.topology_of(snap.nodes[0]).max_block == 1  # modelled without NVLink
    warning = unknown_topology_warning(snap)
    assert warning is not None
    assert "node[01-08]" in warning
    assert "topology_map" in warning
    assert topology_report(snap) == {"unknown": "node[01-08]"}


def test_discovery_can_be_switched_off(recordings: SimpleNamespace) -> None:
    runner = recordings.ReplayRunner(
        "22.05"
    )  # a scontrol show config / cat call would fail the test
    snap = cli(runner, discover_gres_conf=False).snapshot()
    assert len(snap.unknown_topology_nodes) == 8


def test_slurm_conf_dir_is_checked() -> None:
    assert slurm_conf_dir(CONFIG) == "/etc/slurm"
    for bad in ("SLURM_CONF = etc/slurm.conf", "SLURM_CONF = /a/../b", "SLURM_CONF = /a;b"):
        with pytest.raises(SlurmParseError, match="not a plain path"):
            slurm_conf_dir(bad)
    with pytest.raises(SlurmParseError, match="no SLURM_CONF line"):
        slurm_conf_dir("ClusterName = x")


# -- the snapshot format ---------------------------------------------------------------------


def test_topology_source_round_trips_and_old_files_load() -> None:
    topologies = parse_gres_conf_links(GRES)
    topo = topologies["node01"]
    snap = ClusterSnapshot.model_validate(
        {
            "taken_at": "2026-12-02T10:00:00Z",
            "source": "cli",
            "topologies": {topo.name: topo.model_dump()},
            "nodes": [
                {"name": "a", "gpu_model": "a100", "gpu_count": 8, "topology": topo.name,
                 "topology_source": "collector"},
                {"name": "b", "gpu_model": "a100", "gpu_count": 8},
            ],
        }
    )  # fmt: skip
    data = json.loads(snap.model_dump_json())
    assert data["nodes"][0]["topology_source"] == "collector"
    assert "topology_source" not in data["nodes"][1]  # unset: old bodies stay byte-identical
    assert ClusterSnapshot.model_validate(data) == snap
    assert snap.unknown_topology_nodes == ("b",)
    assert snap.topology_sources() == {"collector": ("a",), "unknown": ("b",)}
    # a file or simulator snapshot states its topologies: null there stays PCIe only
    as_file = ClusterSnapshot.model_validate({**data, "source": "file"})
    assert as_file.unknown_topology_nodes == ()
    assert as_file.topology_of(as_file.nodes[1]).name == "pcie-1x8"
    with pytest.raises(ValueError, match="'unknown' is reserved"):
        ClusterSnapshot.model_validate(
            {**data, "topologies": {"unknown": {**topo.model_dump(), "name": "unknown"}}}
        )


def test_an_unreadable_config_location_leaves_nodes_unknown_with_a_warning(
    recordings: SimpleNamespace, caplog: pytest.LogCaptureFixture
) -> None:
    runner = recordings.ReplayRunner("22.05", {"scontrol show config": "ClusterName = x\n"})
    snap = cli(runner).snapshot()
    assert len(snap.unknown_topology_nodes) == 8
    assert "scontrol show config: no SLURM_CONF line" in caplog.text


def test_a_bad_discovered_gres_conf_is_no_source_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from slurm_defrag.slurm.discovery.topology_sources import GresConfText, discovered_topologies

    bad = GresConfText("gres.conf beside slurm.conf", "NodeName=n1 Name=gpu Links=0,1\n")
    assert discovered_topologies(bad) == {}
    assert "gres.conf beside slurm.conf: Links=" in caplog.text
