"""Live: ``slurm-defrag doctor`` against the compose cluster (scripts/cluster.sh up).

* with the hooks installed the way slurm-plugins/INSTALL.md says (the ``installed``
  fixture of tests/plugins: copies the files, adds JobSubmitPlugins=lua/EpilogSlurmctld,
  reconfigures or restarts slurmctld, and puts everything back), as root: every check
  green, exit 0;
* the same as the Operator ``defrag`` (AdminLevel=Operator, docker/README.md
  "Privileges"): the refused writes are named (drain; with packing on, node Weight), and
  over slurmrestd with the Operator's JWT: no requeue endpoint, red;
* a controller that cannot be reached (a slurm.conf copy naming an unresolvable
  SlurmctldHost, read by the real scontrol in the slurmctld container): red, exit 1;
* a database at base (upgraded, then downgraded with ``db downgrade base``): red, exit 1;
* the hook missing: JobSubmitPlugins without lua on a cluster that has none, and
  job_submit.lua looked for where there is no such file: red, exit 1.

Run under ``flock /work/notes/cluster.lock`` on a shared machine: the install restarts
slurmctld on 22.05.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hook_install import hooks_installed
from live_cluster import (
    CTLD,
    DOCKER,
    GRES_CONF,
    REST_URL,
    cluster_is_up,
    config,
    ctld,
    slurm_defrag,
    token,
)

from infra import require

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module", autouse=True)
def cluster_up() -> None:
    require(cluster_is_up(), "the compose Slurm cluster")


def _db(tmp_path: Path, *, base: bool = False) -> str:
    url = f"sqlite:///{tmp_path / 'defrag.db'}"
    up = slurm_defrag("db", "upgrade", "--db", url)
    assert up.returncode == 0, up.stderr
    if base:
        down = slurm_defrag("db", "downgrade", "base", "--db", url, "--yes")
        assert down.returncode == 0, down.stderr
    return url


def _config(
    tmp_path: Path,
    db_url: str,
    *,
    user: str | None = None,
    slurm: dict[str, Any] | None = None,
    **extra: Any,
) -> Path:
    prefix = [DOCKER, "exec", *(["-u", user] if user else []), CTLD]
    lines = [
        f"db_url = {json.dumps(db_url)}",
        f"kill_switch_file = {json.dumps(str(tmp_path / 'STOP'))}",
        *(f"{k} = {json.dumps(v)}" for k, v in extra.items()),
        "[slurm]",
        f"command_prefix = {json.dumps(prefix)}",
        f"gres_conf = {json.dumps(str(GRES_CONF))}",
        "command_timeout_s = 30",
        *(f"{k} = {json.dumps(v)}" for k, v in (slurm or {}).items()),
    ]
    path = tmp_path / "service.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def doctor(cfg: Path, *args: str) -> tuple[int, dict[str, dict[str, Any]]]:
    proc = slurm_defrag("doctor", "--config", str(cfg), "--json", *args)
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["exit_code"] == proc.returncode
    return proc.returncode, {c["name"]: c for c in doc["checks"]}


def _statuses(checks: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {name: c["status"] for name, c in checks.items()}


def test_missing_hook_on_a_cluster_without_one(tmp_path: Path) -> None:
    """The compose cluster runs no job_submit.lua unless a test installs it."""
    # fails under CI=true (the compose cluster has no hook unless a test left it behind)
    require(
        "lua" not in config().get("JobSubmitPlugins", ""),
        "a cluster whose own slurm.conf does not load job_submit.lua",
    )
    code, checks = doctor(_config(tmp_path, _db(tmp_path)))
    assert code == 1
    assert checks["job_submit"]["status"] == "fail"
    assert "JobSubmitPlugins = (null)" in checks["job_submit"]["summary"]
    assert "INSTALL.md" in checks["job_submit"]["fix"]
    assert checks["slurm"]["status"] == "ok"


@pytest.fixture(scope="module")
def hooks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The hooks installed as tests/plugins/ installs them, for this module only: removed
    before the next module's tests (job_submit.lua would tag their jobs' comments)."""
    with hooks_installed(tmp_path_factory) as done:
        yield done


def test_all_green_as_root(hooks: Any, tmp_path: Path) -> None:
    code, checks = doctor(_config(tmp_path, _db(tmp_path)))
    not_ok = {n: c for n, c in checks.items() if c["status"] != "ok"}
    assert not not_ok, not_ok
    assert code == 0
    assert "a tested release" in checks["slurm"]["summary"]
    assert "root (root)" in checks["rights"]["summary"]
    assert "is this version's" in checks["job_submit"]["summary"]
    assert "is this version's" in checks["epilog"]["summary"]
    assert "topology is known (gres.conf: node[01-04])" in checks["topology"]["summary"]
    # the installed table has no short_first; the compose cluster's range: QOS + age
    assert "queue order off" in checks["queue_order"]["summary"]
    assert "live priority range is 11000" in checks["queue_order"]["summary"]


def test_operator_refusals_are_named(hooks: Any, tmp_path: Path) -> None:
    db = _db(tmp_path)
    code, checks = doctor(_config(tmp_path, db, user="defrag"))
    rights = checks["rights"]
    assert rights["status"] == "warn", rights
    assert "defrag (AdminLevel Operator)" in rights["summary"]
    assert "drain/resume nodes" in rights["summary"]
    assert "AdminLevel=Admin" in rights["fix"]
    assert code == 0  # requeue and reservations work: drain plans are only rolled back
    code, checks = doctor(_config(tmp_path, db, user="defrag", packing=True))
    rights = checks["rights"]
    assert rights["status"] == "fail", rights
    assert "node Weight/features (packing)" in rights["summary"]
    assert code == 1


def test_operator_over_rest_cannot_requeue(tmp_path: Path) -> None:
    """slurmrestd as the Operator: it answers and reads, but has no requeue endpoint."""
    token_file = tmp_path / "jwt"
    token_file.write_text(token("defrag", 600), encoding="utf-8")
    rest = {
        "backend": "rest",
        "rest_url": REST_URL,
        "rest_user": "defrag",
        "rest_token_file": str(token_file),
    }
    code, checks = doctor(_config(tmp_path, _db(tmp_path), slurm=rest))
    assert code == 1
    assert checks["slurm"]["status"] == "ok", checks["slurm"]
    assert "rest backend (slurmrestd API v0.0." in checks["backend"]["summary"]
    rights = checks["rights"]
    assert rights["status"] == "fail", rights
    assert "defrag (AdminLevel Operator)" in rights["summary"]
    assert "no requeue endpoint" in rights["summary"]
    assert "drain/resume nodes" in rights["summary"]
    assert "cli backend" in rights["fix"]


def test_plugin_missing_where_it_is_looked_for(hooks: Any, tmp_path: Path) -> None:
    code, checks = doctor(
        _config(tmp_path, _db(tmp_path)), "--job-submit", "/etc/slurm/doctor-none/job_submit.lua"
    )
    assert code == 1
    js = checks["job_submit"]
    assert js["status"] == "fail", js
    assert "/etc/slurm/doctor-none/job_submit.lua cannot be read" in js["summary"]
    assert "No such file" in js["summary"]


def test_database_behind(hooks: Any, tmp_path: Path) -> None:
    code, checks = doctor(_config(tmp_path, _db(tmp_path, base=True)))
    assert code == 1
    assert checks["database"]["status"] == "fail"
    assert "no slurm-defrag schema (base)" in checks["database"]["summary"]
    assert "db upgrade" in checks["database"]["fix"]
    assert checks["slurm"]["status"] == "ok"


@pytest.fixture
def unreachable_conf() -> Iterator[str]:
    """A copy of slurm.conf in the slurmctld container naming a controller host that does
    not resolve: the real scontrol then cannot reach any slurmctld."""
    path = "/tmp/doctor-live-nohost.conf"
    ctld(
        "sh",
        "-c",
        "sed -e 's/^SlurmctldHost=.*/SlurmctldHost=doctor-no-such-controller/I' "
        f"/etc/slurm/slurm.conf > {path}",
    )
    try:
        yield path
    finally:
        ctld("rm", "-f", path, check=False)


def test_slurm_unreachable(unreachable_conf: str, tmp_path: Path) -> None:
    cfg = _config(tmp_path, _db(tmp_path))
    text = cfg.read_text(encoding="utf-8").replace(
        f'"exec", "{CTLD}"', f'"exec", "-e", "SLURM_CONF={unreachable_conf}", "{CTLD}"'
    )
    cfg.write_text(text, encoding="utf-8")
    code, checks = doctor(cfg)
    assert code == 1
    assert checks["slurm"]["status"] == "fail"
    assert "Slurm unavailable" in checks["slurm"]["summary"]
    for name in ("backend", "rights", "topology", "job_submit", "epilog", "clock"):
        assert checks[name]["status"] == "skip", name
    assert checks["database"]["status"] == "ok"
