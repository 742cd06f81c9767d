"""The course scenario end to end: ``slurm-defrag frag --snapshot examples/course.json --json``.

Every expected number below is worked out by hand from the scenario (synth.course_scenario),
not copied from the program's output.

Nodes (all in partition ``batch``, all available):
    node01  A100 40 GB   NVSwitch-8
    node02  A100 40 GB   NVSwitch-8
    node03  A100 80 GB   NVSwitch-8
    node04  A100 40 GB   NVLink pairs (0,1) (2,3) (4,5) (6,7)

Jobs holding GPUs (RUNNING):
    101 node01 {0,1,2,3}      104 node01 {4,5}
    103 node02 {0}            105 node02 {2,3,4,5,6,7}
    106 node03 {1,2,3,4,5,6}
    107 node04 {0}  108 node04 {3}  109 node04 {4,5}
    102 is COMPLETED: its GPUs (node01 6, node03 0) are free again.

Free GPUs:
    node01 {6,7}      = 2      2 x 40 =  80 GB
    node02 {1}        = 1      1 x 40 =  40 GB
    node03 {0,7}      = 2      2 x 80 = 160 GB
    node04 {1,2,6,7}  = 4      4 x 40 = 160 GB
    total               9               440 GB      used = 32 - 9 = 23

Pending: job 110 wants 1 node x 3 GPUs, NVLink-connected (reason Resources). It is the only
pending job, so the workload mix is that one shape with weight 1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "slurm_defrag.cli",
            "frag",
            "--snapshot",
            str(EXAMPLES / "course.json"),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def nodes_of(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["node"]: n for n in report["nodes"]}


def test_mix_is_the_pending_job(report: dict[str, Any]) -> None:
    assert report["mix"]["source"] == "pending"
    assert report["mix"]["items"] == [
        {
            "gpus_per_node": 3,
            "nodes": 1,
            "gpu_model": None,
            "nvlink": True,
            "whole_node": False,
            "partition": "batch",
            "weight": 1.0,
        }
    ]


# Per node, by hand (k = 3 NVLink for unusable / outside / FGD):
#   fits[k] = free // k.  nvlink_fits[k] = disjoint free k-blocks.
#   node01-03 (NVSwitch): any free GPUs form a block; 1-2 free < 3 -> unusable spatial.
#   node04 (pairs): free {1,2,6,7}; partners of 1 (0) and 2 (3) are busy, so only 6+7 is a
#     free pair: nvlink_fits[2] = 1, fits[2] = 4//2 = 2, fits[4] = 1. A pair card can never
#     connect 3 GPUs -> all 4 free GPUs unusable by topology.
#   outside_nvlink_blocks: free GPUs in no free 3-block = every free GPU.
#   FGD: one item, usable by none -> FGD = free GPUs.
EXPECTED_NODES = {
    #         free used  mem  fits[1,2,4,8]   nvlink_fits     lfb (spatial, topo, conf)
    "node01": (2, 6, 80.0, (2, 1, 0, 0), (2, 1, 0, 0), 2, (2, 0, 0)),
    "node02": (1, 7, 40.0, (1, 0, 0, 0), (1, 0, 0, 0), 1, (1, 0, 0)),
    "node03": (2, 6, 160.0, (2, 1, 0, 0), (2, 1, 0, 0), 2, (2, 0, 0)),
    "node04": (4, 4, 160.0, (4, 2, 1, 0), (4, 1, 0, 0), 2, (0, 4, 0)),
}


@pytest.mark.parametrize("name", sorted(EXPECTED_NODES))
def test_node_figures(report: dict[str, Any], name: str) -> None:
    free, used, mem, fits, nvfits, lfb, (spatial, topology, configuration) = EXPECTED_NODES[name]
    n = nodes_of(report)[name]
    c = n["counts"]
    assert n["available"] is True
    assert (c["gpus"], c["free"], c["used"], c["free_unavailable"]) == (8, free, used, 0)
    assert c["free_memory_gb"] == mem
    assert c["fits"] == dict(zip(("1", "2", "4", "8"), fits, strict=True))
    assert c["nvlink_fits"] == dict(zip(("1", "2", "4", "8"), nvfits, strict=True))
    assert n["largest_free_block"] == lfb
    assert c["unusable"] == {
        "spatial": spatial,
        "topology": topology,
        "configuration": configuration,
    }
    assert c["unusable_memory_gb"] == mem  # every free GPU is unusable for the 3nv-job
    assert c["outside_nvlink_blocks"] == free
    assert c["fgd"] == float(free)
    assert c["whole_nodes_free"] == 0


# Cluster = partition batch = sum of the four nodes:
#   free 2+1+2+4 = 9, used 23, memory 80+40+160+160 = 440 GB
#   fits[1] = 9, fits[2] = 1+0+1+2 = 4, fits[4] = 0+0+0+1 = 1, fits[8] = 0
#   nvlink_fits[2] = 1+0+1+1 = 3, nvlink_fits[4] = 0
#   unusable: spatial 2+1+2 = 5, topology 4 (node04), configuration 0 -> 9 GPUs, 440 GB
#   FGD = 9, largest free block = max(2, 1, 2, 2) = 2
CLUSTER = {
    "gpus": 32,
    "used": 23,
    "free": 9,
    "free_unavailable": 0,
    "free_memory_gb": 440.0,
    "fits": {"1": 9, "2": 4, "4": 1, "8": 0},
    "nvlink_fits": {"1": 9, "2": 3, "4": 0, "8": 0},
    "whole_nodes_free": 0,
    "unusable": {"spatial": 5, "topology": 4, "configuration": 0},
    "unusable_memory_gb": 440.0,
    "outside_nvlink_blocks": 9,
    "fgd": 9.0,
}


def test_cluster_and_partition_figures(report: dict[str, Any]) -> None:
    cluster = report["cluster_metrics"]
    assert (cluster["name"], cluster["nodes"], cluster["largest_free_block"]) == ("course", 4, 2)
    assert cluster["counts"] == CLUSTER
    (batch,) = report["partitions"]
    assert (batch["name"], batch["nodes"]) == ("batch", 4)
    assert batch["counts"] == CLUSTER


def test_model_figures(report: dict[str, Any]) -> None:
    """a100 = node01 + node02 + node04; a100-80g = node03."""
    models = {g["name"]: g for g in report["models"]}
    a100, a80 = models["a100"]["counts"], models["a100-80g"]["counts"]
    assert (models["a100"]["nodes"], models["a100-80g"]["nodes"]) == (3, 1)
    # a100: free 2+1+4 = 7, memory 7 x 40 = 280; unusable spatial 2+1 = 3, topology 4
    assert (a100["gpus"], a100["free"], a100["free_memory_gb"]) == (24, 7, 280.0)
    assert a100["unusable"] == {"spatial": 3, "topology": 4, "configuration": 0}
    assert a100["fits"] == {"1": 7, "2": 3, "4": 1, "8": 0}
    assert a100["nvlink_fits"] == {"1": 7, "2": 2, "4": 0, "8": 0}
    # a100-80g: free 2, 2 x 80 = 160 GB, unusable spatial 2
    assert (a80["gpus"], a80["free"], a80["free_memory_gb"]) == (8, 2, 160.0)
    assert a80["unusable"] == {"spatial": 2, "topology": 0, "configuration": 0}
    assert a80["unusable_memory_gb"] == 160.0


def test_job_110_is_falsely_starved(report: dict[str, Any]) -> None:
    """No node fits 3 connected GPUs now: node01-03 have at most 2 free, node04 can never
    connect 3. The capable nodes (node01-03: NVSwitch) hold 2+1+2 = 5 free GPUs >= 3, so
    the job would start if those were not scattered: falsely starved, spatial.
    The partition has 9 free GPUs in all (node04's 4 included)."""
    (job,) = report["pending"]
    assert job["job_id"] == "110"
    assert (job["status"], job["reason"]) == ("falsely-starved", "spatial")
    assert (job["gpus"], job["nodes"], job["gpus_per_node"], job["nvlink"]) == (3, 1, 3, True)
    assert (job["free_matching"], job["free_in_partition"]) == (5, 9)


def test_job_110_diagnosis_names_why_on_each_node(report: dict[str, Any]) -> None:
    (job,) = report["pending"]
    diag = {d["node"]: d for d in job["diagnosis"]}
    assert sorted(diag) == ["node01", "node02", "node03", "node04"]
    # (verdict, free GPUs, largest free block): node01-03 lack GPUs, node04 lacks NVLink
    assert {n: (d["verdict"], d["free"], d["largest_free_block"]) for n, d in diag.items()} == {
        "node01": ("spatial", 2, 2),
        "node02": ("spatial", 1, 1),
        "node03": ("spatial", 2, 2),
        "node04": ("topology", 4, 2),
    }
    assert diag["node01"]["detail"] == "2 free GPUs, job needs 3 on one node"
    assert diag["node04"]["detail"].startswith(
        "4 free GPUs, but nvlink-pairs-8 never forms an NVLink block of 3"
    )
