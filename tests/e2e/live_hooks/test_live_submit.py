"""Live: job_submit.lua inside the compose cluster's slurmctld (scripts/cluster.sh up).

Real ``sbatch`` submissions (held, so they use no resources) and what slurmctld recorded
in each job's AdminComment; refusals as users see them; odd input. The expectations use
the compose cluster's layout (docker/slurm): node01-02 a100 and node03 a100-80g with
NVSwitch (blocks up to 8), node04 h100 with NVLink pairs only (blocks up to 2), every node
in both partitions.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from plugins.plugins_support import (
    DOCKER,
    Installed,
    own_features,
    pack_entry,
    set_node_features,
    table_with,
)

pytestmark = pytest.mark.slurm

RECORDS = [
    # sbatch options                                   AdminComment slurmctld must hold
    (["--gres=gpu:4"], "defrag:nvlink=4 defrag:gpn=4 defrag:nodes=1"),
    (["--gpus-per-node=2", "-N2"], "defrag:nvlink=2 defrag:gpn=2 defrag:nodes=2"),
    (["--gpus=8"], "defrag:nvlink=8 defrag:gpn=8 defrag:nodes=1"),
    (["--gpus=16"], "defrag:nvlink=8 defrag:gpn=8 defrag:nodes=2"),
    (["--gres=gpu:a100:2"], "defrag:nvlink=2 defrag:gpn=2 defrag:nodes=1"),
    (["--gpus-per-node=h100:2"], "defrag:nvlink=2 defrag:gpn=2 defrag:nodes=1"),
    (["--gpus=a100-80g:3", "-N1-2"], "defrag:nvlink=3 defrag:gpn=3 defrag:nodes=1"),
    (
        ["--gpus-per-task=1", "-n4", "--ntasks-per-node=2"],
        "defrag:nvlink=2 defrag:gpn=2 defrag:nodes=2",
    ),
    (["--gres=gpu:4", "--comment=defrag:anygpu"], "defrag:nvlink=0 defrag:gpn=4 defrag:nodes=1"),
    (
        ["--gres=gpu:h100:4", "--comment=defrag:anygpu"],
        "defrag:nvlink=0 defrag:gpn=4 defrag:nodes=1",
    ),
    (
        ["--gres=gpu:1", "--comment=checkpointless defrag:protect"],
        "defrag:nvlink=1 defrag:gpn=1 defrag:nodes=1 defrag:protect",
    ),
    (["--comment=defrag:protect"], "defrag:protect"),
    (["-p", "high", "--gres=gpu:2"], "defrag:nvlink=2 defrag:gpn=2 defrag:nodes=1"),
]


@pytest.mark.parametrize(("opts", "expected"), RECORDS, ids=[" ".join(o) for o, _ in RECORDS])
def test_records_the_block_need(installed: Installed, opts: list[str], expected: str) -> None:
    rc, job, err = installed.cluster.sbatch("-H", *opts)
    assert rc == 0, err
    assert installed.cluster.job_field(job, "AdminComment") == expected


def test_small_jobs_get_the_packing_hint(installed: Installed, tmp_path: Path) -> None:
    """The hint names the feature once a node has it and the table says so; the rendered
    table (no node of the compose cluster has defrag_partial) names it for no job."""
    c = installed.cluster
    _, plain, _ = c.sbatch("-H", "--gres=gpu:2")
    assert c.job_field(plain, "Prefer") in ("", "(null)")
    own = own_features(
        c.sh("scontrol -o show node node03").split("AvailableFeatures=")[1].split()[0]
    )
    try:
        set_node_features(c, "node03", [*own, "defrag_partial"])
        with table_with(c, tmp_path, pack_entry("defrag_partial")):
            _, small, _ = c.sbatch("-H", "--gres=gpu:2")
            _, big, _ = c.sbatch("-H", "--gres=gpu:8")
            _, multi, _ = c.sbatch("-H", "--gres=gpu:1", "-N2")
            _, mine, _ = c.sbatch("-H", "--gres=gpu:1", "--prefer=nosuchfeature")
            assert c.job_field(small, "Prefer") == "defrag_partial"
            assert c.job_field(big, "Prefer") in ("", "(null)")
            assert c.job_field(multi, "Prefer") in ("", "(null)")
            assert c.job_field(mine, "Prefer") == "nosuchfeature"
    finally:
        set_node_features(c, "node03", own)


def test_keeps_existing_admin_comment_text(installed: Installed) -> None:
    """An admin's note survives; our keys follow it (and are re-recorded on update)."""
    c = installed.cluster
    _, job, _ = c.sbatch("-H", "--gres=gpu:2")
    c.run("scontrol", "update", f"job={job}", "AdminComment=site:budget=42 reviewed")
    c.run("scontrol", "update", f"job={job}", "TresPerNode=gres/gpu:4")
    assert c.job_field(job, "AdminComment") == (
        "site:budget=42 reviewed defrag:nvlink=4 defrag:gpn=4 defrag:nodes=1"
    )


def test_impossible_request_is_refused_with_the_limit(installed: Installed) -> None:
    rc, _, err = installed.cluster.sbatch("-H", "--gres=gpu:h100:4")
    assert rc != 0
    assert (
        "sbatch: error: defrag: 4 NVLink-connected h100 GPUs per node requested, but nodes in "
        "partition batch offer NVLink blocks of at most 2 GPUs; add --comment=defrag:anygpu "
        "if any 4 GPUs will do"
    ) in err.splitlines()


def test_update_to_an_impossible_request_is_refused(installed: Installed) -> None:
    c = installed.cluster
    _, job, _ = c.sbatch("-H", "--gres=gpu:h100:2")
    proc = c.run("scontrol", "update", f"job={job}", "TresPerNode=gres/gpu:h100:4", check=False)
    assert proc.returncode != 0
    assert "gpu:h100:2" in c.job_field(job, "TresPerNode")


ODD = [
    # options, refused?, stderr must contain (when refused)
    (["--gres=gpu:100000"], True, "defrag: 100000 GPUs per node is not a possible request"),
    (
        ["--gres=gpu:9"],
        True,
        "defrag: 9 GPUs per node requested, but the largest node in partition batch has 8",
    ),
    (["--gres=gpu:1k"], True, "defrag: 1024 GPUs per node requested"),
    (["--gres=gpu:v100:1"], True, ""),  # no such type: Slurm or we refuse
    (["--gres=gpu:abc:xyz:1"], True, ""),  # sbatch (22.05) or we (24.11) refuse
    (["--gres=gpu:a100:"], True, ""),
    (
        ["--gres=gpu:2", "-N5"],
        True,
        "defrag: 5 nodes with 2 NVLink-connected GPUs each "
        "requested, but partition batch has only 4 such nodes",
    ),
    (["--gres=gpu:0"], False, ""),
    (["--gpus=0"], False, ""),
    (["--comment=100%s %d defrag:anygpu"], False, ""),
]


@pytest.mark.parametrize(("opts", "refused", "message"), ODD, ids=[" ".join(o) for o, _, _ in ODD])
def test_odd_input(installed: Installed, opts: list[str], refused: bool, message: str) -> None:
    c = installed.cluster
    rc, job, err = c.sbatch("-H", *opts)
    if refused:
        assert rc != 0, f"accepted as job {job}"
        assert message in err
    else:
        assert rc == 0, err
        # no GPUs asked for: nothing recorded
        assert "defrag:" not in c.job_field(job, "AdminComment")
    assert "UP" in c.run("scontrol", "ping").stdout


def test_users_cannot_forge_the_record(installed: Installed) -> None:
    """A user's comment cannot set keys, and AdminComment is admin-only in Slurm."""
    c = installed.cluster
    # a user with an account where accounting enforces associations, else nobody
    user = next(
        (u for u in ("alice", "bob") if c.run("id", u, check=False).returncode == 0), "nobody"
    )
    as_user = ["runuser", "-u", user, "--"]
    proc = c.run(
        *as_user,
        "sbatch",
        "--parsable",
        "-H",
        "-J",
        "defrag-plugin-test",
        "--chdir=/tmp",
        "-o",
        "/dev/null",
        "--gres=gpu:4",
        "--comment=defrag:nvlink=1 defrag:gpn=1 defrag:protect",
        "--wrap",
        "true",
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    job = proc.stdout.strip()
    c.created_jobs.append(job)
    assert c.job_field(job, "AdminComment") == (
        "defrag:nvlink=4 defrag:gpn=4 defrag:nodes=1 defrag:protect"
    )
    forged = c.run(
        *as_user, "scontrol", "update", f"job={job}", "AdminComment=defrag:nvlink=0", check=False
    )
    assert forged.returncode != 0
    assert "defrag:nvlink=4" in c.job_field(job, "AdminComment")
    # ...while the user's own updates keep working (the hook must not put an AdminComment
    # change into them: Slurm would deny the whole update)
    own = c.run(*as_user, "scontrol", "update", f"job={job}", "Comment=still mine", check=False)
    assert own.returncode == 0, own.stderr
    assert c.job_field(job, "Comment") == "still mine"
    assert c.job_field(job, "AdminComment") == (
        "defrag:nvlink=4 defrag:gpn=4 defrag:nodes=1 defrag:protect"
    )


def test_no_internal_errors_logged(installed: Installed) -> None:
    """Everything above ran without one Lua error in slurmctld's log."""
    logs = subprocess.run(
        [DOCKER, "logs", "--since", "30m", installed.cluster.container],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    text = logs.stdout + logs.stderr
    assert "slurm-defrag: loaded" in text
    assert "slurm-defrag: internal error" not in text
    assert "cannot load node table" not in text


def test_submission_stays_fast(installed: Installed) -> None:
    """The hook adds no measurable time to a submission (no I/O per job)."""
    c = installed.cluster
    script = (
        "s=$(date +%s%N); for i in $(seq 20); do sbatch -H -J defrag-plugin-test "
        "--gres=gpu:2 --wrap true >/dev/null; done; echo $(( ($(date +%s%N) - s) / 20000000 ))"
    )
    start = time.monotonic()
    per_job_ms = int(c.sh(script).strip())
    c.sh("scancel -n defrag-plugin-test -t PD", check=False)
    assert per_job_ms < 250, f"{per_job_ms} ms per sbatch"
    assert time.monotonic() - start < 30
