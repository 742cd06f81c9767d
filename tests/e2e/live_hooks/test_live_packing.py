"""Live: the packing hint moves a small GPU job onto an already used node, and never
names a feature no node has.

The same situation twice: one node P runs a 1-GPU job and carries the hint's feature
(``defrag_partial``, set here by hand; the table names it with P's partitions, as
``plugins render`` does for a feature slurm.conf gives P), every other node is empty. A
new 1-GPU job is submitted

* without the plugin (JobSubmitPlugins removed, ``scontrol reconfigure``): Slurm opens an
  empty node;
* with the plugin: it lands on P, while that empty node is still free.

And the rendered table (no node of the compose cluster has the feature) gives no job a
hint: a small job that waits for resources shows the reason Resources or Priority, never
BadConstraints (found live on 22.05: with the hint naming a feature no node had, and the
service not running, pending jobs showed BadConstraints).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from plugins.plugins_support import (
    ETC,
    Cluster,
    Installed,
    own_features,
    pack_entry,
    require,
    set_node_features,
    table_with,
)

pytestmark = pytest.mark.slurm

FEATURE = "defrag_partial"


def node_of(c: Cluster, job: str, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = c.job_field(job, "JobState")
        if state == "RUNNING":
            return c.job_field(job, "NodeList")
        assert state == "PENDING", f"job {job} is {state}"
        time.sleep(0.3)
    raise AssertionError(f"job {job} did not start within {timeout_s} s")


def idle_nodes(c: Cluster) -> list[str]:
    out = c.sh("sinfo -h -N -p batch -t idle -o '%N' | sort -u")
    return [n for n in out.split() if n]


def features(c: Cluster, node: str) -> tuple[str, str]:
    out = c.sh(f"scontrol -o show node {node}")
    avail = out.split("AvailableFeatures=")[1].split()[0]
    active = out.split("ActiveFeatures=")[1].split()[0]
    return avail, active


def set_feature(c: Cluster, node: str, on: bool, base: str) -> None:
    """What the service does on partly used nodes (keeping the node's own features)."""
    own = own_features(base)
    set_node_features(c, node, [*own, FEATURE] if on else own)


def toggle_plugin(c: Cluster, on: bool) -> None:
    if on:
        c.sh(f"sed -i 's/^#defrag-test#JobSubmitPlugins=/JobSubmitPlugins=/' {ETC}/slurm.conf")
    else:
        c.sh(f"sed -i 's/^JobSubmitPlugins=/#defrag-test#JobSubmitPlugins=/' {ETC}/slurm.conf")
    c.reconfigure()
    assert ("lua" in c.config().get("JobSubmitPlugins", "")) == on


@pytest.fixture
def partial_node(installed: Installed) -> Iterator[str]:
    c = installed.cluster
    if not installed.changed_conf:
        # The "without the plugin" half needs a cluster whose own slurm.conf does not load
        # it (the compose cluster's does not): fail under CI, skip on a hand-made cluster.
        require(False, "a Slurm cluster whose own configuration does not load job_submit.lua")
    idle = idle_nodes(c)
    assert len(idle) >= 2, f"need two idle GPU nodes in batch, have {idle}"
    # The last idle node: Slurm fills nodes in order, so without a hint it would not
    # pick this one for a new small job.
    node = idle[-1]
    base = features(c, node)[0]
    yield node
    c.cleanup_jobs()
    set_feature(c, node, False, base)
    toggle_plugin(c, True)


def occupy(c: Cluster, node: str) -> None:
    rc, job, err = c.sbatch("-w", node, "--gres=gpu:1", "--comment=defrag:anygpu")
    assert rc == 0, err
    assert node_of(c, job) == node


def test_small_job_fills_the_used_node_only_with_the_plugin(
    installed: Installed, partial_node: str, tmp_path: Path
) -> None:
    c = installed.cluster
    base = features(c, partial_node)[0]

    # -- without the plugin -------------------------------------------------------------
    toggle_plugin(c, False)
    occupy(c, partial_node)
    set_feature(c, partial_node, True, base)  # after reconfigure, which drops it
    rc, job, err = c.sbatch("--gres=gpu:1")
    assert rc == 0, err
    without = node_of(c, job)
    assert "defrag:" not in c.job_field(job, "AdminComment")  # the plugin is really off
    assert without != partial_node, "Slurm picked the used node even without the hint"
    c.cleanup_jobs()
    set_feature(c, partial_node, False, base)

    # -- with the plugin ----------------------------------------------------------------
    toggle_plugin(c, True)
    with table_with(c, tmp_path, pack_entry(FEATURE)):
        occupy(c, partial_node)
        set_feature(c, partial_node, True, base)
        rc, job, err = c.sbatch("--gres=gpu:1")
        assert rc == 0, err
        assert node_of(c, job) == partial_node
        # ...although the node Slurm chose before is still empty
        assert without in idle_nodes(c)


def wait_reason(c: Cluster, job: str, timeout_s: float = 60) -> str:
    """The pending job's reason once the scheduler has looked at it (not ``None``)."""
    deadline = time.monotonic() + timeout_s
    seen: list[str] = []
    while time.monotonic() < deadline:
        seen = c.sh(f"squeue -h -j {job} -o '%T %r'", check=False).split()
        if len(seen) >= 2 and seen[0] == "PENDING" and seen[1] != "None":
            return seen[1]
        assert not seen or seen[0] == "PENDING", f"job {job} is {seen}"
        time.sleep(1)
    raise AssertionError(f"job {job} not evaluated within {timeout_s:g} s: {seen}")


def test_no_hint_names_a_missing_feature_so_no_job_shows_bad_constraints(
    installed: Installed,
) -> None:
    """The rendered table, the service not running, no node with the feature: a small job
    that must wait (every node holds a 1-CPU job, it asks for all 32 CPUs of one) gets no
    --prefer and waits for Resources (or Priority), not with the reason BadConstraints."""
    c = installed.cluster
    out = c.sh(f"sinfo -h -N -o '%N %b' | grep -w {FEATURE} || true")
    assert out.strip() == "", f"feature left on: {out}"
    nodes = sorted(set(c.sh("sinfo -h -N -p batch -o '%N'").split()))
    try:
        for n in nodes:
            rc, blocker, err = c.sbatch("-w", n, "-c", "1", "-t", "10")
            assert rc == 0, err
            assert node_of(c, blocker) == n
        rc, job, err = c.sbatch("--gres=gpu:1", "-c", "32", "-t", "10")
        assert rc == 0, err
        assert c.job_field(job, "Prefer") in ("", "(null)")
        reason = wait_reason(c, job)
        assert reason != "BadConstraints"
        assert reason in ("Resources", "Priority"), reason
    finally:
        c.cleanup_jobs()
