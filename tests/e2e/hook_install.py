"""Install the Slurm-side hooks (job_submit.lua, the epilog) in a live compose cluster, and
remove them: for the live hook tests (``live_hooks/``) and the live tests that need the hooks
(doctor, routing). The hook files and helpers themselves live in ``plugins/plugins_support.py``."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from plugins.plugins_support import (
    BACKUP,
    DOCKER,
    EPILOG_LOG,
    ETC,
    PLUGINS,
    ROOT,
    Cluster,
    Installed,
    TriggerListener,
    require,
    set_epilog_url,
    with_hook_lines,
)

FILES = ("job_submit.lua", "epilog-slurmctld", "defrag_nodes.lua", "defrag-epilog.conf")


@contextmanager
def hooks_installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """Install the hooks in the live cluster; remove them when the block ends.

    Other packages' tests use this (not the fixture: a package-scoped fixture imported
    elsewhere is torn down only at the end of *that* package, so job_submit.lua would
    still rewrite every later test's jobs).

    Whatever happens, the cluster must come back able to start: slurm.conf is restored
    from a copy kept on this host (docker cp works on a stopped container too) before any
    of our files is removed, and the files stay if the restore cannot be confirmed.
    """
    cluster = Cluster()
    require(
        (ROOT / "scripts" / "cluster.sh").exists() and cluster.is_up(),
        f"the compose Slurm cluster ({cluster.container})",
    )
    tmp = tmp_path_factory.mktemp("plugins-live")
    container_id = cluster.container_id()
    nodes = cluster.responding_nodes()
    already = "lua" in cluster.config().get("JobSubmitPlugins", "")
    original = tmp / "slurm.conf.original"
    cluster.cp_out(f"{ETC}/slurm.conf", original)
    cluster.cp_out(f"{ETC}/gres.conf", tmp / "gres.conf")
    saved = tmp / "saved"
    saved.mkdir()
    for name in FILES:  # keep whatever the cluster had under our file names
        if cluster.run("test", "-e", f"{ETC}/{name}", check=False).returncode == 0:
            cluster.cp_out(f"{ETC}/{name}", saved / name)
    # 22.05 starts running a newly configured EpilogSlurmctld only when slurmctld starts
    # (its reconfigure does not); 23.11+ reconfigure restarts slurmctld anyway.
    restart = not already and cluster.version() < (23, 11)
    listener = TriggerListener()
    try:
        conf = tmp / "slurm.conf"
        text = original.read_text(encoding="utf-8")
        conf.write_text(text if already else with_hook_lines(text), encoding="utf-8")
        # the table comes from the cluster's own (updated) configuration, as on a site
        render = subprocess.run(
            [
                str(ROOT / ".venv" / "bin" / "slurm-defrag"),
                "plugins",
                "render",
                "--slurm-conf",
                str(conf),
                "--gres-conf",
                str(tmp / "gres.conf"),
                "-o",
                str(tmp / "defrag_nodes.lua"),
                # the service container's Operator account (docker/Dockerfile: defrag is
                # uid 2000): its hand-over into a defrag-* reservation must pass the hook
                "--service-user",
                "2000",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert render.returncode == 0, render.stderr
        # no node of the compose cluster has defrag_partial: no hint (tests that need one
        # put the feature on a node and the hint in the table, plugins_support.pack_entry)
        assert "packing hint off" in render.stderr, render.stderr
        url = f"http://{cluster.gateway()}:{listener.port}/trigger"
        # files first, configuration last: slurmctld must never see JobSubmitPlugins=lua
        # without job_submit.lua (it refuses to start)
        cluster.cp_in(tmp / "defrag_nodes.lua", f"{ETC}/defrag_nodes.lua")
        for name, mode in (("epilog-slurmctld", 0o755), ("job_submit.lua", 0o644)):
            copy = tmp / name
            copy.write_bytes((PLUGINS / name).read_bytes())
            cluster.cp_in(copy, f"{ETC}/{name}", mode)
        set_epilog_url(cluster, url, tmp)
        cluster.sh(f": > {EPILOG_LOG}")
        if already:
            cluster.run("touch", f"{ETC}/job_submit.lua")
        else:
            cluster.sh(f"cp -p {ETC}/slurm.conf {BACKUP}")  # for a human, if all else fails
            cluster.cp_in(conf, f"{ETC}/slurm.conf")
            if restart:
                cluster.restart(nodes)
            else:
                cluster.reconfigure()
        yield Installed(cluster, listener, url, changed_conf=not already)
    finally:
        listener.close()
        _uninstall(cluster, container_id, nodes, already, restart, original, saved)


def _uninstall(
    cluster: Cluster,
    container_id: str,
    nodes: int,
    already: bool,
    restart: bool,
    original: Path,
    saved: Path,
) -> None:
    if cluster.container_id() != container_id:
        return  # recreated meanwhile (scripts/cluster.sh up): nothing of ours is left
    if cluster.running():
        cluster.cleanup_jobs()
    if not already:
        cluster.cp_in(original, f"{ETC}/slurm.conf")
        if not cluster.running():
            subprocess.run(
                [DOCKER, "start", cluster.container], check=True, capture_output=True, timeout=120
            )
            cluster.wait_up(nodes)
        elif restart:
            cluster.restart(nodes)
        else:
            cluster.reconfigure()
        if "lua" in cluster.config().get("JobSubmitPlugins", ""):
            raise AssertionError(
                f"{cluster.container}: slurm.conf restore not in effect; hook files left in "
                f"{ETC} so slurmctld can still start"
            )
    for name in FILES:
        if (saved / name).exists():
            cluster.cp_in(
                saved / name, f"{ETC}/{name}", 0o755 if name == "epilog-slurmctld" else 0o644
            )
        else:
            cluster.run("rm", "-f", f"{ETC}/{name}", check=False)
    cluster.run("rm", "-f", EPILOG_LOG, BACKUP, check=False)
    if already:
        cluster.run("touch", f"{ETC}/job_submit.lua", check=False)
