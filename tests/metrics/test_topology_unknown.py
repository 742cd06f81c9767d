"""Nodes of unknown topology (a live snapshot, no source covered them): shown as unknown,
never the reason an NVLink job is called topology-fragmented, never an NVLink target."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from builders import busy, node, pending
from slurm_defrag.domain.cluster import ClusterSnapshot, Job, Node
from slurm_defrag.metrics.compute import compute
from slurm_defrag.metrics.starvation import diagnose_job
from slurm_defrag.synth import EPOCH
from slurm_defrag.web.payload import snapshot_payload


def live(nodes: list[Node], jobs: list[Job] | None = None) -> ClusterSnapshot:
    return ClusterSnapshot(
        cluster="test", taken_at=EPOCH, source="cli", nodes=tuple(nodes), jobs=tuple(jobs or ())
    )


def unknown(name: str) -> Node:
    return node(name, None, gpu_count=8)


def test_nvlink_job_on_unknown_nodes_is_topology_unknown_not_fragmented() -> None:
    job = pending("7", 4, nvlink=True)
    snap = live([unknown("gpu01"), unknown("gpu02")], [busy("gpu01", [0, 2, 4, 6]), job])
    status = diagnose_job(snap, job)
    assert status.status == "topology-unknown"
    assert status.reason is None
    assert "2 node(s) that could host it have an unknown NVLink topology" in status.message
    assert {d.detail for d in status.diagnosis} == {
        "4 free GPUs, NVLink topology unknown (no source gave it)",
        "8 free GPUs, NVLink topology unknown (no source gave it)",
    }
    # the same nodes in a file snapshot are PCIe by statement: then it is a verdict
    as_file = ClusterSnapshot.model_validate({**snap.model_dump(), "source": "file"})
    assert diagnose_job(as_file, job).status == "unsatisfiable"


def test_jobs_that_do_not_need_nvlink_or_fit_elsewhere_are_unaffected() -> None:
    plain = pending("8", 4)
    fits = pending("9", 4, nvlink=True)
    snap = live([unknown("gpu01"), node("gpu02")], [plain, fits])
    assert diagnose_job(snap, plain).status == "can-start"
    assert diagnose_job(snap, fits).status == "can-start"  # gpu02 is known NVSwitch


def test_report_web_and_names_say_unknown() -> None:
    snap = live([unknown("gpu01"), unknown("gpu02"), node("gpu03")])
    report = compute(snap)
    assert report.topology_unknown == ("gpu01", "gpu02")
    assert report.topology_sources == {"snapshot": 1, "unknown": 2}
    payload = snapshot_payload(snap, report)
    assert payload["topology_unknown"]["nodes"] == 2
    assert "gpu[01-02]" in payload["topology_unknown"]["message"]
    assert [n["topology"] for n in payload["nodes"]] == ["unknown", "unknown", "nvswitch-8"]
    assert [m.largest_free_block for m in report.nodes] == [1, 1, 8]  # safe side: no NVLink


def test_frag_prints_one_warning_line_naming_the_nodes(tmp_path: Path) -> None:
    snap = live([unknown("gpu01"), unknown("gpu02"), node("gpu03")])
    path = tmp_path / "snap.json"
    path.write_text(snap.model_dump_json(), encoding="utf-8")
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    cmd = [sys.executable, "-m", "slurm_defrag.cli", "frag", "-s", str(path)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    warnings = [line for line in out.stdout.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1
    assert "NVLink topology unknown for 2 GPU node(s): gpu[01-02]" in warnings[0]
    assert "gres_conf, topology_map or topology_dir" in warnings[0]
    assert "pcie" not in out.stdout
    js = subprocess.run([*cmd, "--json"], capture_output=True, text=True, env=env, timeout=60)
    assert json.loads(js.stdout)["topology_unknown"] == ["gpu01", "gpu02"]
    assert js.stderr.count("\n") == 1
    assert "warning: NVLink topology unknown" in js.stderr


def test_planner_never_targets_an_unknown_node_for_an_nvlink_job() -> None:
    """The planner models an unknown node without NVLink: it never places an NVLink job
    there, and the policy does not pick a ``topology-unknown`` job as a target at all (it
    is not known to be falsely starved), so no job is requeued on a guess."""
    from slurm_defrag.planner.facade import make_plan
    from slurm_defrag.policy.file import parse_policy

    def requeueable(job: Job) -> Job:
        return Job.model_validate(
            {
                **job.model_dump(),
                "requeue": True,
                "user": "u",
                # an hour, not a day: b2's and b3's 6 GPUs x 24 h would be past the per-user daily
                # GPU-hour limits (issue #40), which this test is not about
                "start_time": EPOCH - timedelta(hours=1),
            }
        )

    target = pending("t", 4, nvlink=True)
    # two 3-GPU jobs on gpu02: a job as large as the 4-GPU target there is never its
    # victim (the planner's swap rule), so the known node is freed by requeueing one
    blockers = [
        busy("gpu01", [0, 2, 4, 6], "b1"),
        busy("gpu02", [0, 1, 2], "b2"),
        busy("gpu02", [3, 4, 5], "b3"),
    ]
    snap = live([unknown("gpu01"), node("gpu02")], [*map(requeueable, blockers), target])
    policy = parse_policy({"version": 1})
    assert diagnose_job(snap, target).status == "topology-unknown"
    assert make_plan(snap, policy).targets == ()  # not proposed: nothing is requeued
    plan = make_plan(snap, policy, ["t"])  # asked explicitly: served on the known node
    placed = {p.node for t in plan.targets for p in t.placements}
    assert placed == {"gpu02"}
    assert all("gpu01" not in v.gpus for v in plan.victims)
