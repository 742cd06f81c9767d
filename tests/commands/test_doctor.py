"""``slurm-defrag doctor``: each check's green and red path, on the fake Slurm and a fake
controller (a runner answering scontrol/sacctmgr/sdiag/id/head like Slurm 22.05 does)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from builders import node, snapshot
from cli_run import run_main
from slurm_defrag.commands import doctor_checks as dc
from slurm_defrag.service.settings import ServiceSettings
from slurm_defrag.slurm.cli_backend import CliSlurm
from slurm_defrag.slurm.fake import FakeSlurm
from slurm_defrag.slurm.port import WriteKind
from slurm_defrag.slurm.rest import writes_refused
from slurm_defrag.store import migrate
from slurm_defrag.store.engine import make_engine

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "slurm-plugins"
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
TABLE = "-- generated\nreturn {\n  version = 1,\n  partitions = {},\n}\n"

CONFIG = """Configuration data as of 2026-12-02T12:00:00
AccountingStorageType   = accounting_storage/slurmdbd
EpilogSlurmctld         = {epilog}
JobSubmitPlugins        = {plugins}
SlurmUser               = slurm(64030)
SLURM_CONF              = /etc/slurm/slurm.conf
SLURM_VERSION           = {version}
"""


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str = ""


@dataclass
class Controller:
    """Answers the commands doctor runs on the controller, like Slurm does."""

    version: str = "22.05.8"
    plugins: str = "lua"
    epilog: str = "/etc/slurm/epilog-slurmctld"
    uid: int = 0
    user: str = "root"
    level: str = "Administrator"
    skew_s: float = 0.0
    down: bool = False
    config_text: str | None = None
    files: dict[str, str] = field(default_factory=dict)
    seen: list[tuple[str, ...]] = field(default_factory=list)

    def __call__(self, argv: Sequence[str], timeout_s: float) -> Done:
        args = tuple(argv)
        self.seen.append(args)
        if self.down and args[0] in ("scontrol", "sdiag", "sacctmgr"):
            return Done(1, "", "slurm_load_ctl_conf error: Unable to contact slurm controller")
        if args[:3] == ("scontrol", "show", "config"):
            text = (
                self.config_text
                if self.config_text is not None
                else CONFIG.format(
                    epilog=self.epilog or "(null)",
                    plugins=self.plugins or "(null)",
                    version=self.version,
                )
            )
            return Done(0, text)
        if args[0] == "id":
            return Done(0, f"uid={self.uid}({self.user}) gid=0(x) groups=0(x)\n")
        if args[0] == "sacctmgr":
            return Done(0, f"{self.level}\n" if self.level else "")
        if args[0] == "sdiag":
            t = int((NOW + timedelta(seconds=self.skew_s)).timestamp())
            return Done(0, f"****\nsdiag output at Wed Dec 02 12:00:00 2026 ({t})\n")
        if args[0] == "head":
            path = args[-1]
            if path in self.files:
                return Done(0, self.files[path])
            return Done(1, "", f"head: cannot open '{path}' for reading: No such file or directory")
        raise AssertionError(f"unexpected command {args}")


def installed() -> dict[str, str]:
    return {
        "/etc/slurm/job_submit.lua": (PLUGINS / "job_submit.lua").read_text(encoding="utf-8"),
        "/etc/slurm/defrag_nodes.lua": TABLE,
        "/etc/slurm/epilog-slurmctld": (PLUGINS / "epilog-slurmctld").read_text(encoding="utf-8"),
    }


def db_at_head(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'defrag.db'}"
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    return url


def make_env(
    tmp_path: Path,
    ctl: Controller | None = None,
    *,
    nodes: Sequence[Any] | None = None,
    backend: Any = None,
    **settings: Any,
) -> dc.Env:
    ctl = ctl or Controller(files=installed())
    if "db_url" not in settings:
        settings["db_url"] = db_at_head(tmp_path)
    settings.setdefault("kill_switch_file", tmp_path / "STOP")
    s = ServiceSettings(**settings)
    snap = snapshot(nodes if nodes is not None else [node("node01"), node("node02")])
    return dc.Env(
        settings=s,
        backend=backend or FakeSlurm(snap, clock=lambda: NOW),
        controller=CliSlurm(s.slurm, runner=ctl),
        plugins_dir=PLUGINS,
        clock=lambda: NOW,
    )


def by_name(env: dc.Env) -> dict[str, dc.Result]:
    return {r.name: r for r in dc.run_checks(env)}


def test_all_green_is_exit_0(tmp_path: Path) -> None:
    results = dc.run_checks(make_env(tmp_path))
    assert [r.name for r in results] == [
        "slurm",
        "backend",
        "rights",
        "topology",
        "job_submit",
        "route",
        "queue_order",
        "epilog",
        "clock",
        "database",
        "kill_switch",
        "mode",
    ]
    assert {r.name: r.status for r in results} == dict.fromkeys((r.name for r in results), "ok"), (
        results
    )
    assert dc.exit_code(results) == 0


def test_slurm_down_fails_and_skips_what_needs_it(tmp_path: Path) -> None:
    ctl = Controller(down=True, files=installed())
    r = by_name(make_env(tmp_path, ctl))
    assert r["slurm"].status == "fail"
    assert "unavailable" in r["slurm"].summary.lower()
    for name in ("rights", "topology", "job_submit", "route", "epilog", "clock"):
        assert r[name].status == "skip", name  # not a failure of its own (issue #45)
        assert r[name].summary.startswith("not checked"), name
    assert r["database"].status == "ok"
    assert dc.exit_code(list(r.values())) == 1
    # no check waited for its own timeout: only the one scontrol call was made to Slurm
    assert [c for c in ctl.seen if c[0] in ("scontrol", "sdiag", "sacctmgr")] == [
        ("scontrol", "show", "config")
    ]


def test_untested_release_warns_but_passes(tmp_path: Path) -> None:
    r = by_name(make_env(tmp_path, Controller(version="23.11.4", files=installed())))
    assert r["slurm"].status == "warn"
    assert "23.11 is not tested (tested: 22.05, 24.11, 25.11, 26.05)" in r["slurm"].summary
    assert dc.exit_code(list(r.values())) == 0


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\x1b[2J" * 50,
        "SLURM_VERSION = banana\n",
        "SLURM_VERSION = 22.05\nJobSubmitPlugins = " + "x" * 100_000 + "\n",
        "SLURM_VERSION = 22.05\nEpilogSlurmctld = relative/path\nJobSubmitPlugins = lua\n",
    ],
)
def test_hostile_controller_output_is_one_red_line(tmp_path: Path, text: str) -> None:
    ctl = Controller(config_text=text, files=installed())
    results = dc.run_checks(make_env(tmp_path, ctl))
    assert dc.exit_code(results) == 1
    for r in results:
        assert "\n" not in r.summary, r
        assert len(r.summary) < 600, r


@pytest.mark.parametrize(
    ("uid", "user", "level", "packing", "status", "words"),
    [
        (0, "root", "", False, "ok", "root (root)"),
        (64030, "slurm", "", True, "ok", "(SlurmUser)"),
        (2000, "defrag", "Administrator", True, "ok", "AdminLevel Administrator"),
        (2000, "defrag", "Operator", False, "warn", "drain/resume nodes"),
        (2000, "defrag", "Operator", True, "fail", "node Weight/features (packing)"),
        (2000, "defrag", "None", False, "fail", "requeue jobs"),
        (2000, "defrag", "", False, "fail", "not in sacctmgr"),
    ],
)
def test_rights(
    tmp_path: Path, uid: int, user: str, level: str, packing: bool, status: str, words: str
) -> None:
    ctl = Controller(uid=uid, user=user, level=level, files=installed())
    r = dc.check_rights(make_env(tmp_path, ctl, packing=packing))
    assert r.status == status, r
    assert words in r.summary, r
    if status != "ok":
        assert "sacctmgr modify user" in r.fix


def test_operator_without_drain_is_green(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text("version = 1\n[drain]\nenabled = false\n", encoding="utf-8")
    ctl = Controller(uid=2000, user="defrag", level="Operator", files=installed())
    r = dc.check_rights(make_env(tmp_path, ctl, policy=policy))
    assert r.status == "ok", r
    assert "not used here: drain, packing" in r.summary, r


class RestStub(FakeSlurm):
    name = "rest"

    def api_version(self) -> str:
        return "v0.0.38"

    def cannot_write(self) -> dict[WriteKind, str]:
        return writes_refused(self.api_version())


def test_rest_backend_cannot_requeue(tmp_path: Path) -> None:
    env = make_env(tmp_path, backend=RestStub(snapshot([node("node01")])))
    r = dc.check_rights(env)
    assert r.status == "fail"
    assert "no requeue endpoint" in r.summary
    assert "cli backend" in r.fix


@pytest.mark.parametrize(
    ("version", "reservations"), [("v0.0.42", False), ("v0.0.43", True), ("v0.0.100", True)]
)
def test_rest_rights_compare_api_versions_as_numbers(
    tmp_path: Path, version: str, reservations: bool
) -> None:
    # "v0.0.100" < "v0.0.43" as strings: a string comparison called it too old
    class Rest(RestStub):
        def api_version(self) -> str:
            return version

    r = dc.check_rights(make_env(tmp_path, backend=Rest(snapshot([node("node01")]))))
    assert ("create reservations" in r.summary) is not reservations, r
    assert "no requeue endpoint" in r.summary, r


class CliNamed(FakeSlurm):
    name = "cli"


def test_unknown_topology_is_named(tmp_path: Path) -> None:
    nodes = [node("node01"), node("node02", None, gpu_count=8), node("node03", None, gpu_count=1)]
    # a live read (source cli): a node no source covered is unknown, not PCIe
    env = make_env(tmp_path, backend=CliNamed(snapshot(nodes)))
    r = dc.check_topology(env)
    assert r.status == "warn"
    assert "NVLink topology unknown for node02 " in r.summary
    for setting in ("gres_conf", "topology_map", "topology_dir"):
        assert setting in r.fix


def test_job_submit_not_configured(tmp_path: Path) -> None:
    r = dc.check_job_submit(make_env(tmp_path, Controller(plugins="", files=installed())))
    assert r.status == "fail"
    assert "JobSubmitPlugins = (null)" in r.summary


def test_job_submit_file_missing(tmp_path: Path) -> None:
    files = installed()
    del files["/etc/slurm/job_submit.lua"]
    r = dc.check_job_submit(make_env(tmp_path, Controller(files=files)))
    assert r.status == "fail"
    assert "cannot be read" in r.summary
    assert "No such file" in r.summary


def test_job_submit_outdated(tmp_path: Path) -> None:
    files = installed()
    files["/etc/slurm/job_submit.lua"] = "-- an older hook\nfunction slurm_job_submit() end\n"
    r = dc.check_job_submit(make_env(tmp_path, Controller(files=files)))
    assert r.status == "fail"
    assert "not this version's" in r.summary


def test_job_submit_wrapper_calling_ours(tmp_path: Path) -> None:
    files = installed()
    ours = files.pop("/etc/slurm/job_submit.lua")
    files["/etc/slurm/job_submit.lua"] = 'dofile("/etc/slurm/slurm-defrag/job_submit.lua")\n'
    files["/etc/slurm/slurm-defrag/job_submit.lua"] = ours
    files["/etc/slurm/slurm-defrag/defrag_nodes.lua"] = TABLE
    r = dc.check_job_submit(make_env(tmp_path, Controller(files=files)))
    assert r.status == "ok", r
    assert "called from /etc/slurm/job_submit.lua" in r.summary, r


def test_job_submit_table_missing(tmp_path: Path) -> None:
    files = installed()
    del files["/etc/slurm/defrag_nodes.lua"]
    r = dc.check_job_submit(make_env(tmp_path, Controller(files=files)))
    assert r.status == "fail"
    assert "defrag_nodes.lua" in r.summary
    assert "plugins render" in r.fix


def test_job_submit_path_override(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    env.job_submit = "/nonexistent/job_submit.lua"
    r = dc.check_job_submit(env)
    assert r.status == "fail"
    assert "/nonexistent/job_submit.lua cannot be read" in r.summary


def test_list_settings_of_24_11(tmp_path: Path) -> None:
    """24.11 prints ``EpilogSlurmctld[0] = PATH`` (one line per item)."""
    text = CONFIG.format(epilog="(null)", plugins="lua", version="24.11.5").replace(
        "EpilogSlurmctld         = (null)\n",
        "EpilogSlurmctld[0]      = /etc/slurm/other\nEpilogSlurmctld[1]      = "
        "/etc/slurm/epilog-slurmctld\n",
    )
    files = installed()
    files["/etc/slurm/other"] = "#!/bin/sh\n"
    env = make_env(tmp_path, Controller(config_text=text, files=files))
    assert env.conf()["EpilogSlurmctld"] == "/etc/slurm/other,/etc/slurm/epilog-slurmctld"
    r = dc.check_epilog(env)
    assert r.status == "ok", r
    assert r.summary.startswith("/etc/slurm/epilog-slurmctld is this version's")


def test_epilog_paths(tmp_path: Path) -> None:
    assert (
        dc.check_epilog(make_env(tmp_path, Controller(epilog="", files=installed()))).status
        == "warn"
    )
    files = installed()
    del files["/etc/slurm/epilog-slurmctld"]
    r = dc.check_epilog(make_env(tmp_path, Controller(files=files)))
    assert r.status == "fail"
    assert "cannot be read" in r.summary
    files["/etc/slurm/epilog-slurmctld"] = "#!/bin/sh\nexit 0\n"
    r = dc.check_epilog(make_env(tmp_path, Controller(files=files)))
    assert r.status == "warn"
    assert "not this version's" in r.summary


def test_database_states(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "empty.db").touch()  # an empty SQLite database (doctor creates none)
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    r = dc.check_database(make_env(tmp_path, db_url=empty))
    assert r.status == "fail"
    assert "no slurm-defrag schema" in r.summary
    assert "db upgrade" in r.fix
    url = db_at_head(tmp_path)
    monkeypatch.setattr(migrate, "REVISIONS", (*migrate.REVISIONS, "9999"))
    r = dc.check_database(make_env(tmp_path, db_url=url))
    assert r.status == "fail"
    assert "head is 9999" in r.summary
    monkeypatch.setattr(migrate, "REVISIONS", ("0000",))
    r = dc.check_database(make_env(tmp_path, db_url=url))
    assert r.status == "fail"
    assert "newer than this slurm-defrag" in r.summary
    monkeypatch.undo()
    r = by_name(make_env(tmp_path, db_url=f"sqlite:///{tmp_path}/no/such/dir/x.db"))["database"]
    assert r.status == "fail"
    assert "no database there" in r.summary


def test_unreachable_database_is_red(tmp_path: Path) -> None:
    bad = tmp_path / "not-a-db"
    bad.write_bytes(b"this is not sqlite" * 100)
    results = dc.run_checks(make_env(tmp_path, db_url=f"sqlite:///{bad}"))
    r = {x.name: x for x in results}["database"]
    assert r.status == "fail"
    assert "cannot open database" in r.summary


@pytest.mark.parametrize(
    ("skew", "status"), [(0.0, "ok"), (-2.0, "ok"), (10.0, "warn"), (-300.0, "fail")]
)
def test_clock(tmp_path: Path, skew: float, status: str) -> None:
    r = dc.check_clock(make_env(tmp_path, Controller(skew_s=skew, files=installed())))
    assert r.status == status, r
    if status != "ok":
        assert ("ahead of" if skew > 0 else "behind") in r.summary


def test_kill_switch_and_mode(tmp_path: Path) -> None:
    (tmp_path / "STOP").touch()
    r = by_name(make_env(tmp_path, mode="off"))
    assert r["kill_switch"].status == "warn"
    assert "takes no action" in r["kill_switch"].summary
    assert r["mode"].status == "warn"
    assert (
        by_name(make_env(tmp_path, mode="enforce", kill_switch_file=tmp_path / "GO"))["mode"].status
        == "ok"
    )


# -- through the command line ------------------------------------------------------------


def test_cli_unreachable_slurm_is_exit_1_with_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "service.toml"
    cfg.write_text(
        f'db_url = "{db_at_head(tmp_path)}"\n'
        f'[slurm]\ncommand_prefix = ["{tmp_path}/no-such-cmd"]\n',
        encoding="utf-8",
    )
    capsys.readouterr()
    code = run_main("doctor", "--config", str(cfg), "--json")
    out = capsys.readouterr().out
    assert code == 1
    doc = json.loads(out)
    assert doc["ok"] is False
    assert doc["exit_code"] == 1
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["slurm"]["status"] == "fail"
    assert "no-such-cmd does not exist" in checks["slurm"]["summary"]
    assert checks["rights"]["status"] == "skip"
    assert checks["database"]["status"] == "ok"


def test_cli_text_output_is_one_line_per_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "service.toml"
    cfg.write_text(
        f'db_url = "{db_at_head(tmp_path)}"\n[slurm]\ncommand_prefix = ["{tmp_path}/nope"]\n',
        encoding="utf-8",
    )
    capsys.readouterr()
    assert run_main("doctor", "--config", str(cfg)) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 13  # 12 checks and the verdict
    assert lines[0].startswith("FAIL slurm")
    assert "not ready for enforce" in lines[-1]


def test_cli_bad_config_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "service.toml"
    cfg.write_text('mode = "sometimes"\n', encoding="utf-8")
    assert run_main("doctor", "--config", str(cfg)) == 3
    assert "mode" in capsys.readouterr().err


def test_cli_usage_error_is_2() -> None:
    assert run_main("doctor", "--no-such-option") == 2


def test_runner_argv_are_lists(tmp_path: Path) -> None:
    ctl = Controller(files=installed())
    dc.run_checks(make_env(tmp_path, ctl))
    assert all(isinstance(a, str) for call in ctl.seen for a in call)
    assert ("head", "-c", "1000001", "--", "/etc/slurm/job_submit.lua") in ctl.seen
    assert subprocess  # argv lists only: nothing here builds a shell string


class RestPing(RestStub):
    """A rest backend whose ping answers ``ping``."""

    def __init__(self, ping: Any, version: str = "v0.0.42") -> None:
        super().__init__(snapshot([node("node01")]))
        self.ping, self.version = ping, version

    def api_version(self) -> str:
        return self.version

    def call(self, method: str, path: str, body: Any = None) -> Any:
        assert (method, path) == ("GET", f"/slurm/{self.version}/ping")
        return self.ping


@pytest.mark.parametrize(
    ("ping", "status", "words"),
    [
        ({"meta": {"Slurm": {"release": "22.05.8"}}, "pings": [{"pinged": "UP"}]}, "ok", "22.05.8"),
        ({"meta": {"slurm": {"release": "24.11.5"}}, "pings": [{"pinged": "UP"}]}, "ok", "24.11.5"),
        (
            {"meta": {"slurm": {"release": "24.11.5"}}, "pings": [{"pinged": "DOWN"}]},
            "fail",
            "pinged DOWN",
        ),
        ({"meta": {"slurm": {"release": 2411}}}, "fail", "no meta.slurm.release"),
        ([1, 2, 3], "fail", "no meta.slurm.release"),
        ({"meta": {"slurm": {"release": "\x1b[31mbanana"}}}, "fail", "no release"),
    ],
)
def test_rest_ping(tmp_path: Path, ping: Any, status: str, words: str) -> None:
    env = make_env(tmp_path, backend=RestPing(ping))
    r = {x.name: x for x in dc.run_checks(env)}["slurm"]
    assert r.status == status, r
    assert words in r.summary, r


def test_topology_block_without_domains_is_named(tmp_path: Path) -> None:
    text = CONFIG.format(epilog="(null)", plugins="lua", version="24.11.5")
    ctl = Controller(config_text=text + "TopologyPlugin          = topology/block\n")
    env = make_env(tmp_path, ctl)
    r = dc.check_topology(env)
    assert r.status == "warn"
    assert "topology/block" in r.summary
    assert "no NVLink domains" in r.summary
    assert "topology_conf" in r.fix


def _routing(tmp_path: Path, table_names: str | None, params: str) -> dc.Env:
    files = installed()
    if table_names is not None:
        files["/etc/slurm/defrag_nodes.lua"] = TABLE.replace(
            "  version = 1,\n", f'  version = 1,\n  route_file = "{table_names}",\n'
        )
    text = CONFIG.format(epilog="/etc/slurm/epilog-slurmctld", plugins="lua", version="22.05.8") + (
        f"SchedulerParameters     = {params}\n" if params else ""
    )
    route = tmp_path / "route" / "defrag_route.lua"
    return make_env(
        tmp_path,
        Controller(files=files, config_text=text),
        packing=True,
        packing_lever="fgd-route-score",
        route_file=route,
    )


def test_route_check_is_quiet_when_routing_is_off(tmp_path: Path) -> None:
    r = dc.check_route(make_env(tmp_path))
    assert (r.status, r.summary) == ("ok", "per-job routing off (packing_lever is not fgd-route*)")


def test_route_check_green_and_red(tmp_path: Path) -> None:
    route = tmp_path / "route" / "defrag_route.lua"
    # Slurm would refuse a --prefer naming a feature that is gone
    r = dc.check_route(_routing(tmp_path, str(route), "bf_continue"))
    assert r.status == "fail"
    assert "ignore_prefer_validation" in r.summary
    # the table names no file, or another one
    r = dc.check_route(_routing(tmp_path, None, "ignore_prefer_validation"))
    assert r.status == "fail"
    assert "names no route_file" in r.summary
    assert f"--route-file {route}" in r.fix
    r = dc.check_route(_routing(tmp_path, "/elsewhere/r.lua", "ignore_prefer_validation"))
    assert r.status == "fail"
    assert "reads the route from /elsewhere/r.lua" in r.summary
    # the directory is missing
    r = dc.check_route(_routing(tmp_path, str(route), "bf_continue,ignore_prefer_validation"))
    assert r.status == "fail"
    assert "cannot write" in r.summary
    route.parent.mkdir()
    r = dc.check_route(_routing(tmp_path, str(route), "ignore_prefer_validation"))
    assert r.status == "ok", r
    assert str(route) in r.summary


# -- the queue order's cap (issue #41 item 2) -----------------------------------------

SITE_WEIGHTS = (
    "PriorityType            = priority/multifactor\n"
    "PriorityWeightAge       = 1000\n"
    "PriorityWeightAssoc     = 0\n"
    "PriorityWeightFairShare = 10000\n"
    "PriorityWeightJobSize   = 1000\n"
    "PriorityWeightPartition = 1000\n"
    "PriorityWeightQOS       = 0\n"
    "PriorityWeightTRES      = (null)\n"
)


def _rendered(tmp_path: Path, weights: str, **opts: Any) -> str:
    """defrag_nodes.lua as `plugins render` writes it for a slurm.conf with these lines
    (a partition named short_first too: the check must not read it as the entry)."""
    from slurm_defrag.commands.plugins import RenderOptions, build_table, render_lua
    from slurm_defrag.slurm.discovery.slurm_conf import parse_slurm_conf

    conf = tmp_path / "slurm.conf"
    conf.write_text(
        weights.replace(" ", "").replace("(null)", "")
        + "NodeName=g[1-4] Gres=gpu:a100:8\nPartitionName=short_first Nodes=ALL Default=YES\n",
        encoding="utf-8",
    )
    table, _ = build_table(parse_slurm_conf(conf), {}, RenderOptions(pack_feature=None, **opts))
    return render_lua(table, ["slurm.conf"])


def _queue_order(tmp_path: Path, table: str, live: str) -> dc.Result:
    files = installed() | {"/etc/slurm/defrag_nodes.lua": table}
    text = CONFIG.format(epilog="(null)", plugins="lua", version="24.11.5") + live
    return dc.check_queue_order(make_env(tmp_path, Controller(config_text=text, files=files)))


def test_queue_order_shows_the_cap_and_the_weights_it_read(tmp_path: Path) -> None:
    table = _rendered(tmp_path, SITE_WEIGHTS, short_first=0.1)
    r = _queue_order(tmp_path, table, SITE_WEIGHTS)
    assert r.status == "ok", r
    assert "a boost of at most 1300 priority points, 10 % of the priority range 13000" in (
        r.summary
    )
    assert "Age=1000,FairShare=10000,JobSize=1000,Partition=1000" in r.summary
    # the live weights moved since the render: the cap is another share of them now
    r = _queue_order(tmp_path, table, SITE_WEIGHTS.replace("= 10000", "= 100000"))
    assert r.status == "warn"
    assert "rendered for a range of 13000; the live range is 103000" in r.summary
    assert "1.26 % of it" in r.summary
    assert "--priority-config -" in r.fix
    # no queue order, or no job_submit.lua at all
    r = _queue_order(tmp_path, _rendered(tmp_path, SITE_WEIGHTS), SITE_WEIGHTS)
    assert (r.status, r.summary.split(":")[0]) == ("ok", "queue order off")


def test_queue_order_under_basic_and_in_an_uncapped_table(tmp_path: Path) -> None:
    basic = "PriorityType            = priority/basic\n"
    r = _queue_order(tmp_path, _rendered(tmp_path, basic, short_first=0.1), basic)
    assert r.status == "ok", r
    assert "priority/basic has no priority range, so the boost is off (cap 0)" in r.summary
    r = _queue_order(tmp_path, _rendered(tmp_path, SITE_WEIGHTS, short_first=0.1), basic)
    assert r.status == "warn"
    assert "runs priority/basic but the table's boost cap is 1300 points" in r.summary
    old = "return {\n  version = 1,\n  short_first = { share = 0.1, span = 10080 },\n}\n"
    r = _queue_order(tmp_path, old, SITE_WEIGHTS)
    assert r.status == "warn"
    assert "has no cap" in r.summary


# -- a host without Slurm, and no side effects (issue #45) -----------------------------


def _no_scontrol(argv: Sequence[str], timeout_s: float) -> Done:
    raise FileNotFoundError(2, "No such file or directory", argv[0])


def test_missing_scontrol_is_named_and_skips_count_as_no_failure(tmp_path: Path) -> None:
    """Was "start slurmctld / check the command prefix, munge and the network" and eight
    failures: the one fault is that the client commands are not installed."""
    env = make_env(tmp_path)
    env.controller = CliSlurm(env.settings.slurm, runner=_no_scontrol)
    results = dc.run_checks(env)
    r = {x.name: x for x in results}
    assert r["slurm"].status == "fail"
    assert "scontrol is not on PATH" in r["slurm"].summary
    assert "client commands" in r["slurm"].fix
    assert "munge" not in r["slurm"].fix
    skipped = [x.name for x in results if x.status == "skip"]
    assert skipped == [
        "backend",
        "rights",
        "topology",
        "job_submit",
        "route",
        "queue_order",
        "epilog",
        "clock",
    ]
    assert all(r[n].summary == "not checked: scontrol is not on PATH" for n in skipped)
    assert [x.name for x in results if x.status == "fail"] == ["slurm"]
    assert dc.exit_code(results) == 1


def test_text_verdict_counts_failures_not_skips(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    cfg = tmp_path / "service.toml"
    cfg.write_text(
        f'db_url = "{db_at_head(tmp_path)}"\nkill_switch_file = "{tmp_path / "STOP"}"\n',
        encoding="utf-8",
    )
    capsys.readouterr()
    assert run_main("doctor", "--config", str(cfg)) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("FAIL slurm")
    assert "scontrol is not on PATH" in lines[0]
    assert sum(line.startswith("skip ") for line in lines) == 8
    assert lines[-1] == "not ready for enforce: 1 check(s) failed, 8 not checked"


@pytest.mark.parametrize("where", ["default", "--db"])
def test_doctor_creates_no_database(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: the default database (folder and file) created as a side effect."""
    import slurm_defrag.store.engine as engine_module

    monkeypatch.delenv("SLURM_DEFRAG_DB_URL", raising=False)
    monkeypatch.delenv("SLURM_DEFRAG_CONFIG", raising=False)
    monkeypatch.setattr(engine_module.os, "geteuid", lambda: 1000)  # not root's /var/lib
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    args = ["doctor", "--command-prefix", str(tmp_path / "no-such-cmd"), "--json"]
    db = tmp_path / "here.db"
    if where == "--db":
        args += ["--db", f"sqlite:///{db}"]
    capsys.readouterr()
    assert run_main(*args) == 1
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert checks["database"]["status"] == "fail"
    assert "no database there" in checks["database"]["summary"]
    assert "db upgrade" in checks["database"]["fix"]
    assert not (tmp_path / "state").exists()
    assert not db.exists()
