"""Live: docs/quickstart.md, followed verbatim on a fresh login node of the compose cluster.

Every ```sh block of the page runs, in order, as one bash script with ``-euo pipefail``,
as root, in a new container on the cluster's network. The container is made from the
service image (it has what a login node has: Debian's Python, the Slurm client commands of
the cluster's release, the cluster's munge key and slurm.conf, gres.conf), with the
image's own slurm-defrag install and settings removed first, so the page's ``pip install``
is a real first install. The page's wheel directory (/srv/wheels) holds this checkout's
wheel; the dependencies come from PyPI, as on a site.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_cluster import CTLD, DOCKER, PROJECT, ROOT, cluster_is_up
from service_container import IMAGE, image_ready

from infra import require

pytestmark = pytest.mark.slurm

PAGE = ROOT / "docs" / "quickstart.md"


def page_script() -> str:
    """The page's shell blocks, in order, as one script."""
    blocks = re.findall(r"^```sh\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), re.M | re.S)
    assert len(blocks) >= 4, "docs/quickstart.md lost its shell blocks"
    return "\n".join(blocks)


def _docker(*args: str, timeout: float = 120, stdin: str | None = None) -> str:
    proc = subprocess.run(
        [DOCKER, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, f"docker {args[0]} failed ({proc.returncode}):\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def wheel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheels")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(ROOT)],
        check=True,
        timeout=300,
        capture_output=True,
    )
    assert list(out.glob("slurm_defrag-*.whl"))
    return out


@pytest.fixture
def login_node(wheel_dir: Path) -> Iterator[str]:
    require(cluster_is_up(), f"compose Slurm cluster {PROJECT} (scripts/cluster.sh up)")
    require(image_ready(), f"service image {IMAGE} (scripts/cluster.sh build)")
    network = _docker(
        "inspect", "--format", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}}", CTLD
    ).strip()
    name = f"{PROJECT}-quickstart-{uuid.uuid4().hex[:6]}"
    _docker(
        "run", "-d", "--name", name, "--hostname", "login", "--network", network,
        "-v", f"{wheel_dir}:/srv/wheels:ro", "--entrypoint", "/usr/bin/tini",
        IMAGE, "--", "sleep", "infinity",
    )  # fmt: skip
    try:
        # A login node as a site has it: munged running; no slurm-defrag yet.
        _docker(
            "exec", name, "bash", "-c",
            "rm -rf /opt/slurm-defrag /usr/local/bin/slurm-defrag /etc/slurm-defrag"
            " && mkdir -p /run/munge && chown munge:munge /run/munge"
            " && setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged"
            " && for i in $(seq 50); do [ -S /run/munge/munge.socket.2 ] && break; sleep 0.1; done"
            " && scontrol ping",
        )  # fmt: skip
        yield name
    finally:
        subprocess.run([DOCKER, "rm", "-f", name], capture_output=True, timeout=120, check=False)


def test_quickstart_runs_verbatim_on_a_fresh_login_node(login_node: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [DOCKER, "exec", "-i", login_node, "bash", "-euo", "pipefail", "-s"],
        input=page_script(),
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    out = proc.stdout
    assert proc.returncode == 0, f"quickstart failed ({proc.returncode}):\n{out}\n{proc.stderr}"
    # what each step promises, seen in its output
    assert re.search(r"slurm-defrag \d+\.\d+", out), out  # --version
    for node in ("node01", "node02", "node03", "node04"):
        assert node in out, f"frag/plan did not show {node}:\n{out}"
    assert "Traceback" not in out + proc.stderr
    # doctor: Slurm, backend and rights green as root; every node's topology known, found
    # through Slurm's own config location (nothing on the page names gres.conf)
    for check in ("slurm", "backend", "rights", "database", "clock"):
        assert re.search(rf"^ok +{check} ", out, re.M), f"doctor {check} not ok:\n{out}"
    assert re.search(r"^ok +topology .*gres\.conf: node\[01-04\]", out, re.M), out
    # serve --once stored a cycle's snapshot in the default database
    copy = tmp_path / "defrag.db"
    subprocess.run(
        [DOCKER, "cp", f"{login_node}:/var/lib/slurm-defrag/defrag.db", str(copy)],
        check=True,
        timeout=60,
    )
    with sqlite3.connect(copy) as conn:
        (snapshots,) = conn.execute("SELECT count(*) FROM snapshots").fetchone()
    assert snapshots >= 1
