"""NVLink domains from topology/block: the parser on the 24.11 recordings, the cli backend
replaying them, and the releases/backends that have no blocks (issue #19).

Recordings: tests/fixtures/topology-block-24.11 (README there: one slurmctld and four
slurmd of Slurm 24.11.5, two blocks b1=node[01-02], b2=node[03-04], BlockSizes=2,4).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest

from slurm_defrag.domain.cluster import NvlinkDomain
from slurm_defrag.slurm.cli_backend import CliSlurm
from slurm_defrag.slurm.connection import SlurmSettings
from slurm_defrag.slurm.discovery.topology_block import nvlink_domains, topology_plugin
from slurm_defrag.slurm.failures import SlurmParseError

BLOCK = Path(__file__).resolve().parent.parent / "fixtures" / "topology-block-24.11"
VARIANTS = BLOCK / "variants"


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def domains(*pairs: tuple[str, tuple[str, ...]]) -> tuple[NvlinkDomain, ...]:
    return tuple(NvlinkDomain(name=n, nodes=nodes) for n, nodes in pairs)


# -- parser on recordings ---------------------------------------------------------------


def test_recorded_blocks_are_domains_and_the_aggregated_block_is_not() -> None:
    got = nvlink_domains(text(BLOCK / "scontrol_show_topology.txt"))
    assert got == domains(("b1", ("node01", "node02")), ("b2", ("node03", "node04")))


def test_one_node_view_gives_its_block() -> None:
    got = nvlink_domains(text(BLOCK / "scontrol_show_topology_node01.txt"))
    assert got == domains(("b1", ("node01", "node02")))


@pytest.mark.parametrize(
    ("variant", "expected"),
    [
        # BlockSize= is the base block size, not the node count: rack1 has 3 nodes.
        ("uneven", (("rack1", ("node01", "node02", "node03")), ("rack2", ("node04",)))),
        # node04 is in no block: it gets no domain
        ("node-outside", (("b1", ("node01", "node02")), ("b2", ("node03",)))),
        (
            "many",
            tuple((f"nvl72-rack0{i}", (f"node0{i}",)) for i in range(1, 5)),
        ),
        ("default", ()),  # topology/default prints nothing
        ("tree", ()),  # topology/tree: switches are no NVLink domains
    ],
)
def test_recorded_variants(variant: str, expected: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
    got = nvlink_domains(text(VARIANTS / f"{variant}_scontrol_show_topology.txt"))
    assert got == domains(*expected)


def test_shared_tree_recording_gives_no_domains(recordings: SimpleNamespace) -> None:
    assert nvlink_domains(recordings.text("24.11", "scontrol_show_topology.txt")) == ()


def test_topology_plugin_from_recorded_config() -> None:
    assert topology_plugin(text(BLOCK / "scontrol_show_config.txt")) == "topology/block"
    assert topology_plugin("ClusterName = x\n") is None


# -- odd and hostile lines: one error naming the line -------------------------------------

GOOD = "BlockName=b1 BlockIndex=0 Nodes=node[01-02] BlockSize=2\n"


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("BlockName=b2 BlockIndex=1 Nodes=node[03-04] BlockSize=2 junk", "'junk' is not Key=Value"),
        ("Block Name=b2 Nodes=node03", "'Block' is not Key=Value"),
        ("Rack=b2 Nodes=node03", "unknown line 'Rack=', expected BlockName="),
        ("BlockName=b2 Nodes=node03 Nodes=node04", "Nodes= given twice"),
        ("BlockName=b1 Nodes=node[03-04]", "block b1 listed twice (first on line 1)"),
        ("BlockName=b2 Nodes=node[02-03]", "node node02 in block b2 and in b1 (line 1)"),
        ("BlockName=b2 BlockIndex=1", "block b2 has no Nodes="),
        ("BlockName=b2 Nodes=(null)", "block b2 has no Nodes="),
        ("BlockName=b2 Nodes=node[0-99999999]", "bad host list"),
        ("BlockName=b2 Nodes=node[03-", "bad host list"),
        ("BlockName=b2 BlockIndex=-1 Nodes=node03", "BlockIndex: not a number"),
        ("BlockName=b2 BlockSize=1e9 Nodes=node03", "BlockSize: not a number"),
        ("BlockName=b2\x1b[31m Nodes=node03", "bad block name"),
        ("BlockName= Nodes=node03", "bad block name"),
        ("BlockName=b,2 Nodes=node03", "bad block name"),
    ],
)
def test_bad_line_is_one_error_naming_it(bad_line: str, message: str) -> None:
    with pytest.raises(SlurmParseError) as err:
        nvlink_domains(GOOD + bad_line + "\n")
    text = str(err.value)
    assert text.startswith("scontrol show topology: line 2")
    assert message in text
    assert "\n" not in text
    assert "\x1b" not in text


def test_blank_lines_are_ignored() -> None:
    assert nvlink_domains("\n" + GOOD + "   \n") == domains(("b1", ("node01", "node02")))


# -- cli backend replaying the block cluster --------------------------------------------


def block_backend(recordings: SimpleNamespace) -> tuple[CliSlurm, object]:
    runner = recordings.ReplayRunner("24.11")
    runner.dir = BLOCK
    settings = SlurmSettings(gres_conf=BLOCK / "config" / "gres.conf")
    return CliSlurm(settings, runner=runner, clock=lambda: recordings.taken_at["24.11"]), runner


def test_cli_snapshot_of_the_block_cluster(recordings: SimpleNamespace) -> None:
    backend, runner = block_backend(recordings)
    snap = backend.snapshot()
    assert snap.nvlink_domains == domains(
        ("b1", ("node01", "node02")), ("b2", ("node03", "node04"))
    )
    assert {n.name: n.nvlink_domain for n in snap.nodes} == {
        "node01": "b1",
        "node02": "b1",
        "node03": "b2",
        "node04": "b2",
    }
    assert snap.domain_of(snap.node_by_name["node03"]) == snap.nvlink_domains[1]
    # the recorded 2-node job runs inside block b1
    job = snap.job_by_id["1"]
    assert set(job.gpus) == {"node01", "node02"}
    assert {snap.node_by_name[n].nvlink_domain for n in job.gpus} == {"b1"}
    calls = [" ".join(c) for c in runner.calls]  # type: ignore[attr-defined]
    assert calls.count("scontrol show config") == 1
    assert calls.count("scontrol show topology") == 1
    # the plugin is read once per backend; the blocks at every snapshot
    backend.snapshot()
    calls = [" ".join(c) for c in runner.calls]  # type: ignore[attr-defined]
    assert calls.count("scontrol show config") == 1
    assert calls.count("scontrol show topology") == 2


def test_cli_bad_topology_output_fails_the_read_with_one_line(
    recordings: SimpleNamespace,
) -> None:
    backend, runner = block_backend(recordings)
    runner.overrides["scontrol show topology"] = "BlockName=b1 Nodes=node01 oops\n"  # type: ignore[attr-defined]
    with pytest.raises(SlurmParseError, match=r"^scontrol show topology: line 1: 'oops'"):
        backend.snapshot()


def test_cli_tree_cluster_does_not_ask_for_blocks(recordings: SimpleNamespace) -> None:
    runner = recordings.ReplayRunner("24.11")
    snap = recordings.cli("24.11", runner)
    assert snap.snapshot().nvlink_domains == ()
    calls = [" ".join(c) for c in runner.calls]
    assert "scontrol show config" in calls
    assert "scontrol show topology" not in calls


def test_cli_22_05_asks_nothing_new(recordings: SimpleNamespace) -> None:
    runner = recordings.ReplayRunner("22.05")
    snap = recordings.cli("22.05", runner).snapshot()
    assert snap.nvlink_domains == ()
    assert all(n.nvlink_domain is None for n in snap.nodes)
    calls = [" ".join(c) for c in runner.calls]
    assert not [c for c in calls if c.startswith(("scontrol show config", "scontrol show topo"))]


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_rest_has_no_domains_like_cli_on_a_tree_cluster(
    recordings: SimpleNamespace, version: str
) -> None:
    """slurmrestd shows no blocks (recorded v0.0.40-42 node lists: no block field, no
    topology endpoint): on the recorded tree cluster both backends agree on none."""
    assert recordings.rest(version).snapshot().nvlink_domains == ()
    assert recordings.cli(version).snapshot().nvlink_domains == ()


@pytest.mark.parametrize("api", ["v0.0.40", "v0.0.41", "v0.0.42"])
def test_recorded_rest_nodes_do_not_name_blocks(api: str) -> None:
    body = text(BLOCK / f"slurmrestd_GET_slurm_{api}_nodes.json")
    assert '"b1"' not in body
    assert '"b2"' not in body
    assert "block" not in body.lower().replace("blockprobe", "")


# -- topology_conf: the blocks for backends that cannot see them ------------------------


def test_topology_conf_of_the_recorded_cluster() -> None:
    from slurm_defrag.slurm.discovery.topology_block import topology_conf_domains

    got = topology_conf_domains(text(BLOCK / "config" / "topology.conf"), "topology.conf")
    assert got == domains(("b1", ("node01", "node02")), ("b2", ("node03", "node04")))


def test_topology_conf_any_case_comments_and_tree_lines() -> None:
    from slurm_defrag.slurm.discovery.topology_block import topology_conf_domains

    conf = "# racks\nblockname=r1 nodes=node[01-02]  # NVL72 a\n\nBlockSizes=2\n"
    assert topology_conf_domains(conf, "t.conf") == domains(("r1", ("node01", "node02")))
    tree = text(recordings_dir("24.11") / "config" / "topology.conf")
    assert topology_conf_domains(tree, "t.conf") == ()


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ("BlockName=r1 Nodes=node01 LinkSpeed=1\n", "t.conf: line 1: unknown key 'LinkSpeed='"),
        ("Include other.conf\n", "t.conf: line 1: 'Include' is not Key=Value"),
        ("BlockName=r1 Nodes=node01\nBlockName=r2 Nodes=node01\n", "line 2: node node01"),
        ("Frobnicate=1\n", "t.conf: line 1: unknown line 'Frobnicate='"),
    ],
)
def test_topology_conf_bad_line_is_one_input_error(conf: str, message: str) -> None:
    from slurm_defrag.errors import InputError
    from slurm_defrag.slurm.discovery.topology_block import topology_conf_domains

    with pytest.raises(InputError) as err:
        topology_conf_domains(conf, "t.conf")
    assert message in str(err.value)


def recordings_dir(version: str) -> Path:
    return BLOCK.parent / f"slurm-{version}"


@pytest.mark.parametrize("backend", ["cli", "rest", "pyslurm"])
def test_topology_conf_gives_every_backend_the_domains(
    recordings: SimpleNamespace, backend: str
) -> None:
    """The recorded tree cluster (node01-08) with a topology.conf naming two racks: all
    three backends put the same domains in the snapshot, and cli asks Slurm nothing more."""
    path = BLOCK / "config" / "topology.conf"  # b1 = node[01-02], b2 = node[03-04]
    runner = recordings.ReplayRunner("24.11")
    if backend == "cli":
        reader = recordings.cli("24.11", runner, topology_conf=path)
    elif backend == "rest":
        reader = recordings.rest("24.11", topology_conf=path)
    else:
        reader = recordings.pyslurm("24.11")
        reader.settings = reader.settings.model_copy(update={"topology_conf": path})
    snap = reader.snapshot()
    assert [d.name for d in snap.nvlink_domains] == ["b1", "b2"]
    assert snap.node_by_name["node02"].nvlink_domain == "b1"
    assert snap.node_by_name["node05"].nvlink_domain is None
    assert ["scontrol", "show", "topology"] not in runner.calls


def test_the_controller_config_is_read_again_after_its_ttl(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A long-running service notices a switch to topology/block (slurmctld restarted)."""
    import subprocess

    from slurm_defrag.slurm import cli_backend as cli_module
    from slurm_defrag.slurm.cli_backend import CliSlurm

    configs = iter(["TopologyPlugin = topology/tree\n", "TopologyPlugin = topology/block\n"] * 2)

    def runner(argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        assert list(argv) == ["scontrol", "show", "config"]
        return subprocess.CompletedProcess(list(argv), 0, next(configs), "")

    backend = CliSlurm(runner=runner)
    assert backend.topology_plugin() == "topology/tree"
    assert backend.topology_plugin() == "topology/tree"  # within the TTL: not read again
    monkeypatch.setattr(cli_module, "CONFIG_TTL_S", 0.0)
    assert backend.topology_plugin() == "topology/block"
