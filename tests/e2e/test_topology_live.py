"""Live: where node topologies come from (issue #19), on the compose cluster (22.05/24.11).

* default discovery: with no ``gres_conf`` set, the cli backend finds the compose gres.conf
  beside Slurm's slurm.conf (``scontrol show config``) and reads it inside the slurmctld
  container through ``docker exec``: every GPU node gets the same topology as with the
  file given explicitly, with source ``gres.conf``;
* a ``topology_map`` written from docker/slurm/gres.conf gives exactly the same topologies
  (source ``map``);
* with no source at all (discovery switched off, no settings: what a service whose
  gres.conf is unreadable sees), ``frag`` names the GPU nodes as unknown in one warning line
  and calls none of them PCIe.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from live_cluster import CTLD, DOCKER, GRES_CONF, cli_backend, cluster_is_up

from slurm_defrag.domain.cluster import ClusterSnapshot
from slurm_defrag.slurm.cli_backend import CliSlurm
from slurm_defrag.slurm.connection import SlurmSettings
from slurm_defrag.slurm.discovery.gres_conf import parse_gres_conf_links
from slurm_defrag.slurm.parse.mapping import expand_config_hosts

pytestmark = pytest.mark.slurm

PREFIX = [DOCKER, "exec", CTLD]


@pytest.fixture(scope="module")
def explicit() -> ClusterSnapshot:
    if not cluster_is_up():
        pytest.fail("compose cluster is not up (scripts/cluster.sh up)")
    return cli_backend().snapshot()


def topologies(snap: ClusterSnapshot) -> dict[str, str | None]:
    return {n.name: n.topology for n in snap.nodes if n.gpu_count}


def test_default_discovery_reads_the_gres_conf_beside_slurm_conf(
    explicit: ClusterSnapshot,
) -> None:
    snap = CliSlurm(SlurmSettings(command_prefix=PREFIX)).snapshot()
    assert topologies(snap) == topologies(explicit)
    assert snap.topologies == explicit.topologies
    assert {n.topology_source for n in snap.nodes if n.gpu_count} == {"gres.conf"}
    assert snap.unknown_topology_nodes == ()
    assert topologies(snap)["node04"] == "nvlink-8-pairs"  # named after its graph
    assert topologies(snap)["node01"] == "nvlink-8-all"


def test_a_topology_map_equal_to_gres_conf_gives_the_same_topologies(
    explicit: ClusterSnapshot, tmp_path: Path
) -> None:
    # the map as an admin would write it: the Links= rows of the compose gres.conf, per node
    rows: dict[str, list[list[int]]] = {}
    for line in GRES_CONF.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            continue
        fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        if "Links" in fields:
            for node in expand_config_hosts(fields["NodeName"], "gres.conf"):
                rows.setdefault(node, []).append([int(v) for v in fields["Links"].split(",")])
    assert rows == {n: rows[n] for n in parse_gres_conf_links(GRES_CONF.read_text())}
    path = tmp_path / "topology-map.json"
    path.write_text(json.dumps({"nodes": {n: {"links": r} for n, r in rows.items()}}))
    settings = SlurmSettings(command_prefix=PREFIX, discover_gres_conf=False, topology_map=path)
    snap = CliSlurm(settings).snapshot()
    assert topologies(snap) == topologies(explicit)
    assert snap.topologies == explicit.topologies
    assert {n.topology_source for n in snap.nodes if n.gpu_count} == {"map"}


def test_frag_names_unknown_nodes_instead_of_calling_them_pcie() -> None:
    if not cluster_is_up():
        pytest.fail("compose cluster is not up (scripts/cluster.sh up)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_DEFRAG_")}
    env |= {
        "SLURM_DEFRAG_SLURM_COMMAND_PREFIX": json.dumps(PREFIX),
        "SLURM_DEFRAG_SLURM_DISCOVER_GRES_CONF": "false",
        "COLUMNS": "100",
        "NO_COLOR": "1",
    }
    out = subprocess.run(
        [sys.executable, "-m", "slurm_defrag.cli", "frag"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    warnings = [line for line in out.stdout.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, out.stdout
    assert "NVLink topology unknown for 4 GPU node(s): node[01-04]" in warnings[0]
    assert "pcie" not in out.stdout.lower()
    assert "unknown" in out.stdout.split(warnings[0], 1)[1]  # the map says so per node
