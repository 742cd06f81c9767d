"""The checks of ``slurm-defrag doctor``: each one reads one thing and says one line.

A check returns a :class:`Result` (``ok``, ``warn`` or ``fail``, one line, the fix when
not ok) and never raises: whatever Slurm, a file or the database answers — down,
refused, unreadable, hostile — becomes a ``fail`` line naming what was read. ``fail``
means "do not turn enforce on yet"; ``warn`` means it is safe but something is missing
or unverified; ``skip`` ("not checked") means it could not be looked at because an
earlier check failed (Slurm not reached): that failure is the one to fix, and it is the
one counted. Slurm is reached only through the adapters (:mod:`slurm_defrag.slurm`).
Nothing is created or changed: the database is only opened when it exists.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from slurm_defrag.errors import DefragError
from slurm_defrag.hooks_location import plugins_dir
from slurm_defrag.slurm import controller
from slurm_defrag.slurm.failures import SlurmCommandMissing, SlurmError, SlurmUnavailableError

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

    from slurm_defrag.domain.cluster import ClusterSnapshot
    from slurm_defrag.service.settings import ServiceSettings
    from slurm_defrag.slurm.backends import SlurmBackend
    from slurm_defrag.slurm.cli_backend import CliSlurm

Status = Literal["ok", "warn", "fail", "skip"]

TESTED_RELEASES = {
    (22, 5): "every live test",
    (24, 11): "every live test",
    (25, 11): "the core live suite",
    (26, 5): "the core live suite",
}
"""Slurm releases the live tests run on, and how much of them (README "Slurm releases and
backends tested": the core suite is the backends' parity, one enforce plan, one fault)."""

CLOCK_WARN_S = 2.0
"""Skew beyond the measurement's own uncertainty that is worth a warning."""
CLOCK_FAIL_S = 60.0
"""Skew that fails: plan deadlines, reservation start times and job ages are compared
across the two clocks (and munge refuses credentials at its TTL, 300 s by default)."""


@dataclass(frozen=True)
class Result:
    name: str
    status: Status
    summary: str
    fix: str = ""


@dataclass
class Env:
    """What the checks read from, built once by the command (tests pass fakes)."""

    settings: ServiceSettings
    backend: SlurmBackend
    controller: CliSlurm
    plugins_dir: Path | None = None
    job_submit: str | None = None
    """Where job_submit.lua is on the controller (default: next to SLURM_CONF)."""
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    _conf: dict[str, str] | None = None
    _snapshot: ClusterSnapshot | None = None

    def conf(self) -> dict[str, str]:
        if self._conf is None:
            self._conf = controller.show_config(self.controller)
        return self._conf

    def snapshot(self) -> ClusterSnapshot:
        if self._snapshot is None:
            self._snapshot = self.backend.snapshot()
        return self._snapshot


def _one_line(value: object, limit: int = 300) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- Slurm -------------------------------------------------------------------------------


def check_slurm(env: Env) -> Result:
    """slurmctld answers; its release, and whether that release is tested."""
    if env.backend.name == "rest":
        version, where = _rest_release(env), "slurmrestd"
    else:
        version, where = env.conf()["SLURM_VERSION"], "scontrol show config"
    major, minor = controller.release(version, where)
    tested = ", ".join(f"{a}.{b:02d}" for a, b in TESTED_RELEASES)
    if (how := TESTED_RELEASES.get((major, minor))) is not None:
        return Result(
            "slurm", "ok", f"slurmctld answers: Slurm {version} (a tested release: {how})"
        )
    return Result(
        "slurm",
        "warn",
        f"slurmctld answers: Slurm {version}, release {major}.{minor:02d} is not tested "
        f"(tested: {tested})",
        "expect differences in what Slurm prints; run doctor again after each upgrade and "
        "report what fails",
    )


def _rest_release(env: Env) -> str:
    from slurm_defrag.slurm.failures import SlurmParseError

    rest = env.backend
    v = rest.api_version()  # type: ignore[attr-defined]
    data = rest.call("GET", f"/slurm/{v}/ping")  # type: ignore[attr-defined]
    where = f"GET /slurm/{v}/ping"
    meta = data.get("meta") if isinstance(data, dict) else None
    plugin = (meta.get("Slurm") or meta.get("slurm")) if isinstance(meta, dict) else None
    rel = plugin.get("release") if isinstance(plugin, dict) else None
    if not isinstance(rel, str):
        raise SlurmParseError(f"{where}: no meta.slurm.release")
    pings = data.get("pings")
    if isinstance(pings, list) and pings and isinstance(pings[0], dict):
        state = pings[0].get("pinged")
        if isinstance(state, str) and state.upper() != "UP":
            raise SlurmUnavailableError(
                f"Slurm unavailable: {where}: slurmctld pinged {_one_line(state, 20)}"
            )
    return rel


def check_backend(env: Env) -> Result:
    """The configured backend reads nodes and jobs."""
    snap = env.snapshot()
    extra = ""
    if env.backend.name == "rest":
        extra = f" (slurmrestd API {env.backend.api_version()})"  # type: ignore[attr-defined]
    gpu_nodes = sum(1 for n in snap.nodes if n.gpu_count)
    return Result(
        "backend",
        "ok",
        f"{env.backend.name} backend{extra} reads {len(snap.nodes)} nodes ({gpu_nodes} with "
        f"GPUs), {len(snap.jobs)} jobs, {len(snap.reservations)} reservations",
    )


# -- rights ------------------------------------------------------------------------------

# (what slurm-defrag does, the Slurm call, needs Admin)
_WRITES = (
    ("requeue", "requeue jobs", False),
    ("reservation", "create/delete reservations", False),
    ("hand-over", "move the target job into its reservation", False),
    ("drain", "drain/resume nodes (drain plans)", True),
    ("packing", "node Weight/features (packing)", True),
)


def _slurm_user(conf: dict[str, str]) -> str:
    return conf.get("SlurmUser", "").split("(", 1)[0].strip()


def check_rights(env: Env) -> Result:
    """Which of slurm-defrag's writes Slurm will refuse for the account it runs as."""
    user, level, who = _rights_level(env)
    used = _writes_used(env)
    refused = {key: what for key, what, admin in _WRITES if _refuses(level, admin)}
    for kind, why in env.backend.cannot_write().items():
        # what the backend cannot do is the reason, but for drain and packing a refusal
        # for lack of rights stays the one given
        if kind in ("drain", "packing"):
            refused.setdefault(kind, why)
        else:
            refused[kind] = why
    blocking = [
        refused[k]
        for k in ("requeue", "reservation", "hand-over", "packing")
        if k in refused and k in used
    ]
    if blocking:
        return _rights_blocked(env, user, who, refused, used, blocking)
    if "drain" in refused and "drain" in used:
        return Result(
            "rights",
            "warn",
            f"{who}: may requeue and manage reservations; Slurm refuses: {refused['drain']}, "
            "so plans that drain are rolled back",
            f"sacctmgr modify user {user} set AdminLevel=Admin, or [drain] enabled = false "
            "in the policy",
        )
    unused = sorted(k for k in refused if k not in used)
    note = f" (refused, not used here: {', '.join(unused)})" if unused else ""
    return Result("rights", "ok", f"{who}: may do every write this configuration uses{note}")


def _rights_level(env: Env) -> tuple[str, str, str]:
    """(user, Slurm admin level: administrator/operator/none, who for the message)."""
    conf = env.conf()
    if env.backend.name == "rest":
        user, uid = env.settings.slurm.rest_user, None
    else:
        me = controller.identity(env.controller)
        user, uid = me.user, me.uid
    if uid == 0 or user == "root":
        return user, "administrator", f"{user} (root)"
    if user == _slurm_user(conf):
        return user, "administrator", f"{user} (SlurmUser)"
    if "slurmdbd" not in conf.get("AccountingStorageType", ""):
        return user, "none", f"{user} (no slurmdbd: AdminLevel cannot apply)"
    found = controller.admin_level(env.controller, user)
    who = f"{user} (AdminLevel {found.capitalize() if found else 'none: not in sacctmgr'})"
    return user, found or "none", who


def _writes_used(env: Env) -> set[str]:
    """The writes this configuration (policy, packing) makes."""
    from slurm_defrag.policy.file import default_policy, load_policy

    s = env.settings
    policy = load_policy(s.policy) if s.policy else default_policy()
    used = {"requeue", "reservation", "hand-over"}
    if policy.drain.enabled:
        used.add("drain")
    if s.packing:
        used.add("packing")
    return used


def _refuses(level: str, admin: bool) -> bool:
    return level == "none" or (admin and level != "administrator")


def _rights_blocked(
    env: Env, user: str, who: str, refused: dict[str, str], used: set[str], blocking: list[str]
) -> Result:
    """A write every plan needs is refused: the failure and how to fix it."""
    rest = bool(env.backend.cannot_write())  # a backend that cannot: the cli backend can
    packing = "packing" in refused and "packing" in used
    fix = (
        'use the cli backend (backend = "cli")'
        if rest
        else f"sacctmgr modify user {user} set AdminLevel="
        + ("Admin" if packing else "Operator")
        + " (or run as root/SlurmUser)"
    )
    if packing and not rest:
        fix += ", or packing = false"
    also = [w for k, w in refused.items() if k in used and w not in blocking]
    line = f"{who}: Slurm refuses: " + "; ".join(blocking)
    if also:
        line += "; also refused (plans using them are rolled back): " + "; ".join(also)
    return Result("rights", "fail", line, fix)


# -- topology ----------------------------------------------------------------------------


def check_topology(env: Env) -> Result:
    """Every GPU node has a known NVLink topology, and from where (per source)."""
    from slurm_defrag.slurm.discovery.topology_sources import topology_report

    snap = env.snapshot()
    report = topology_report(snap)
    unknown = report.pop("unknown", None)
    where = "; ".join(f"{src}: {hosts}" for src, hosts in sorted(report.items())) or "none"
    if env.conf().get("TopologyPlugin") == "topology/block" and not snap.nvlink_domains:
        # rest and pyslurm cannot see blocks: without topology_conf a multi-node NVLink
        # job would be planned as if any nodes could form its domain
        return Result(
            "topology",
            "warn",
            f"Slurm runs topology/block but the {env.settings.slurm.backend} backend read "
            f"no NVLink domains (node topology: {where}"
            + (f"; unknown: {unknown})" if unknown else ")"),
            "set [slurm] topology_conf to the controller's topology.conf, or use the cli "
            "backend (it reads scontrol show topology)",
        )
    if unknown is None:
        return Result("topology", "ok", f"every GPU node's NVLink topology is known ({where})")
    return Result(
        "topology",
        "warn",
        f"NVLink topology unknown for {unknown} (treated as having no NVLink, never "
        f"defragmented for NVLink jobs); known: {where}",
        "give their Links= in the gres.conf beside slurm.conf or [slurm] gres_conf, a "
        "[slurm] topology_map, or collect them into [slurm] topology_dir "
        "(slurm-defrag topology collect; docs/topology.md)",
    )


# -- the Slurm-side hooks ----------------------------------------------------------------

_DOFILE = re.compile(r"""dofile\s*\(?\s*["']([^"'\n]{1,512})["']""")


def _reference(env: Env, name: str) -> str | None:
    d = plugins_dir(env.plugins_dir)
    if d is None:
        return None
    try:
        return (d / name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _same(a: str, b: str) -> bool:
    return a.replace("\r\n", "\n").rstrip() == b.replace("\r\n", "\n").rstrip()


def check_job_submit(env: Env) -> Result:
    """job_submit.lua configured, installed, this version's, and its table beside it."""
    conf = env.conf()
    plugins = [
        p.strip().removeprefix("job_submit/") for p in conf.get("JobSubmitPlugins", "").split(",")
    ]
    install = "install slurm-plugins/job_submit.lua and defrag_nodes.lua (slurm-plugins/INSTALL.md)"
    if "lua" not in plugins:
        return Result(
            "job_submit",
            "fail",
            "slurmctld runs no job_submit.lua: JobSubmitPlugins = "
            + (_one_line(conf.get("JobSubmitPlugins"), 80) or "(null)"),
            install + ", add JobSubmitPlugins=lua",
        )
    slurm_conf = conf.get("SLURM_CONF") or "/etc/slurm/slurm.conf"
    path = env.job_submit or str(Path(slurm_conf).parent / "job_submit.lua")
    try:
        text = controller.read_file(env.controller, path)
    except SlurmUnavailableError:
        raise
    except SlurmError as exc:
        return Result(
            "job_submit",
            "fail",
            f"JobSubmitPlugins = lua but {path} cannot be read: {_one_line(exc, 160)}",
            install,
        )
    ours = _reference(env, "job_submit.lua")
    if ours is None:
        return Result(
            "job_submit",
            "warn",
            f"{path} is installed, not compared: this version's slurm-plugins/ is not found",
            "pass --plugins-dir DIR (the slurm-plugins/ of this release)",
        )
    script = path
    if not _same(text, ours):
        script = ""
        for target in _DOFILE.findall(text)[:4]:  # a site's own script calling ours
            try:
                if target.startswith("/") and _same(
                    controller.read_file(env.controller, target), ours
                ):
                    script = target
                    break
            except SlurmError:
                continue
        if not script:
            return Result(
                "job_submit",
                "fail",
                f"{path} is not this version's slurm-plugins/job_submit.lua (nor dofile()s it)",
                "copy slurm-plugins/job_submit.lua of this version there and touch it "
                "(slurm-plugins/INSTALL.md)",
            )
    table = str(Path(script).parent / "defrag_nodes.lua")
    try:
        tab = controller.read_file(env.controller, table)
    except SlurmError as exc:
        return Result(
            "job_submit",
            "fail",
            f"{script} is current, but its table {table} cannot be read: {_one_line(exc, 120)}",
            f"slurm-defrag plugins render --slurm-conf {slurm_conf} -o {table}",
        )
    if not re.search(r"^\s*version\s*=\s*1\s*,", tab, re.MULTILINE):
        return Result(
            "job_submit",
            "fail",
            f"{table} is not a version 1 table from `slurm-defrag plugins render`",
            f"slurm-defrag plugins render --slurm-conf {slurm_conf} -o {table}",
        )
    via = "" if script == path else f" (called from {path})"
    return Result("job_submit", "ok", f"{script}{via} is this version's, with its table {table}")


_ROUTE_FILE = re.compile(r"""^\s*route_file\s*=\s*"([^"\\\n]{1,1024})"\s*,""", re.MULTILINE)


def check_route(env: Env) -> Result:
    """With per-job routing on (``packing_lever = fgd-route*``): Slurm keeps a ``--prefer``
    soft, job_submit.lua's table names the file the service writes, and the service can
    write there."""
    s = env.settings
    if not (s.packing and s.packing_lever.startswith("fgd-route")):
        return Result("route", "ok", "per-job routing off (packing_lever is not fgd-route*)")
    route = s.route_file
    assert route is not None  # the settings refuse the lever without it
    params = env.conf().get("SchedulerParameters", "")
    if "ignore_prefer_validation" not in params:
        return Result(
            "route",
            "fail",
            "SchedulerParameters lacks ignore_prefer_validation: a job whose --prefer names a "
            "node feature that is gone (the service stopping) would be refused",
            "add SchedulerParameters=ignore_prefer_validation (slurm-plugins/INSTALL.md)",
        )
    slurm_conf = env.conf().get("SLURM_CONF") or "/etc/slurm/slurm.conf"
    script = env.job_submit or str(Path(slurm_conf).parent / "job_submit.lua")
    table = str(Path(script).parent / "defrag_nodes.lua")
    render = (
        f"slurm-defrag plugins render --slurm-conf {slurm_conf} --route-file {route} -o {table}"
    )
    try:
        tab = controller.read_file(env.controller, table)
    except SlurmUnavailableError:
        raise
    except SlurmError as exc:
        return Result("route", "fail", f"{table} cannot be read: {_one_line(exc, 120)}", render)
    m = _ROUTE_FILE.search(tab)
    if m is None:
        return Result(
            "route", "fail", f"{table} names no route_file: job_submit.lua routes nothing", render
        )
    if Path(m[1]) != route:
        return Result(
            "route",
            "fail",
            f"job_submit.lua reads the route from {m[1]}, the service writes {route}",
            render,
        )
    if not route.parent.is_dir() or not os.access(route.parent, os.W_OK | os.X_OK):
        return Result(
            "route",
            "fail",
            f"this process cannot write {route} (directory missing or not writable)",
            f"create {route.parent} on the controller's local disk, owned by the service's "
            "user and readable by SlurmUser",
        )
    return Result("route", "ok", f"per-job routing: the service writes {route}, {table} names it")


def _lua_entry(text: str, key: str) -> str | None:
    """The text of the top-level table entry ``key = { ... }`` (braces balanced outside
    strings), as ``plugins render`` writes it (two spaces in: a partition of that name is
    four in); None when the table has none."""
    m = re.search(rf"^  {key} = {{", text, re.MULTILINE)
    if m is None:
        return None
    depth, quoted, i = 0, False, m.end() - 1
    while i < len(text):
        ch = text[i]
        if quoted:
            if ch == "\\":
                i += 1
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[m.end() : i]
        i += 1
    return None


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.3g} %" if whole else "-"


def check_queue_order(env: Env) -> Result:
    """What job_submit.lua's queue order (``short_first``) may change: the cap on its boost
    in priority points and as a share of the live priority range, and the weights it is
    read from (``scontrol show config``), against the range the table was rendered for."""
    from slurm_defrag.packing.queue_order import read_range

    conf = env.conf()
    if "lua" not in conf.get("JobSubmitPlugins", ""):
        return Result("queue_order", "ok", "queue order off: slurmctld runs no job_submit.lua")
    slurm_conf = conf.get("SLURM_CONF") or "/etc/slurm/slurm.conf"
    script = env.job_submit or str(Path(slurm_conf).parent / "job_submit.lua")
    table = str(Path(script).parent / "defrag_nodes.lua")
    live = read_range(conf, "scontrol show config")
    render = (
        f"scontrol show config | slurm-defrag plugins render --slurm-conf {slurm_conf} "
        f"--priority-config - --short-first SHARE ... -o {table}"
    )
    try:
        tab = controller.read_file(env.controller, table)
    except SlurmUnavailableError:
        raise
    except SlurmError as exc:
        return Result(
            "queue_order",
            "warn",
            f"not checked: {table} cannot be read ({_one_line(exc, 120)})",
            "see the job_submit check",
        )
    entry = _lua_entry(tab, "short_first")
    if entry is None:
        return Result(
            "queue_order", "ok", "queue order off: the table has no short_first (no job's "
            f"priority is changed); the live priority range is {live.points}",
        )  # fmt: skip
    weights = f"PriorityType {live.plugin or '(default)'}, weights {live.describe()}"
    cap_m = re.search(r"\bcap\s*=\s*(\d+)\b", entry)
    if cap_m is None:
        return Result(
            "queue_order",
            "warn",
            "queue order uncapped: the table's short_first has no cap (rendered before the "
            "bound): a boost reaches 3 x span (30240 points) whatever the weights; the live "
            f"range is {live.points} ({weights})",
            render,
        )
    cap = int(cap_m[1])
    range_m = re.search(r"\brange\s*=\s*(\d+)\b", entry)
    rendered = int(range_m[1]) if range_m else None
    if live.basic:
        if cap == 0:
            return Result(
                "queue_order",
                "ok",
                "queue order: priority/basic has no priority range, so the boost is off "
                "(cap 0): no job's priority is changed",
            )
        return Result(
            "queue_order",
            "warn",
            f"slurmctld runs priority/basic but the table's boost cap is {cap} points: under "
            "basic a nice moves a job past that many earlier submissions",
            render,
        )
    if rendered != live.points:
        return Result(
            "queue_order",
            "warn",
            f"the table's boost cap of {cap} priority points was rendered for a range of "
            f"{rendered if rendered is not None else '(unknown)'}; the live range is "
            f"{live.points} ({weights}): the cap is {_percent(cap, live.points)} of it",
            render,
        )
    return Result(
        "queue_order",
        "ok",
        f"queue order: a boost of at most {cap} priority points, {_percent(cap, live.points)} "
        f"of the priority range {live.points} ({weights}); the rest is fair-share's, QOS's "
        "and the other factors'",
    )


def check_epilog(env: Env) -> Result:
    """EpilogSlurmctld runs this version's epilog (it wakes the service when GPUs free)."""
    conf = env.conf()
    paths = [p.strip() for p in conf.get("EpilogSlurmctld", "").split(",") if p.strip()]
    fix = (
        "install slurm-plugins/epilog-slurmctld and set EpilogSlurmctld= "
        "(slurm-plugins/INSTALL.md); without it cycles only run every interval_s"
    )
    if not paths:
        return Result("epilog", "warn", "EpilogSlurmctld is not set: no cycle when GPUs free", fix)
    ours = _reference(env, "epilog-slurmctld")
    for p in paths[:4]:
        try:
            text = controller.read_file(env.controller, p)
        except SlurmUnavailableError:
            raise
        except SlurmError as exc:
            return Result(
                "epilog",
                "fail",
                f"EpilogSlurmctld = {_one_line(p, 120)} cannot be read: {_one_line(exc, 120)}",
                "install the file or fix EpilogSlurmctld= (slurmctld runs it after every job)",
            )
        if ours is not None and _same(text, ours):
            return Result("epilog", "ok", f"{p} is this version's epilog-slurmctld")
    if ours is None:
        return Result(
            "epilog",
            "warn",
            f"EpilogSlurmctld = {', '.join(paths)}, not compared: slurm-plugins/ not found",
            "pass --plugins-dir DIR (the slurm-plugins/ of this release)",
        )
    return Result(
        "epilog",
        "warn",
        f"EpilogSlurmctld = {_one_line(', '.join(paths), 120)} is not this version's "
        "epilog-slurmctld (a wrapper calling it is fine)",
        "copy slurm-plugins/epilog-slurmctld of this version (slurm-plugins/INSTALL.md)",
    )


# -- database, clock, switches -----------------------------------------------------------


def check_database(env: Env) -> Result:
    """The database opens and its schema is at this version's Alembic head."""
    from slurm_defrag.store import migrate
    from slurm_defrag.store.engine import (
        check_reachable,
        display_url,
        make_engine,
        parse_url,
        resolve_url,
    )

    # create=False, and a SQLite file that is not there is reported, not opened: SQLite
    # (and the store's own 0600 pre-creation) would make an empty database of it.
    url = resolve_url(env.settings.db_url, create=False)
    parsed = parse_url(url)
    path = _sqlite_file(parsed) if parsed.get_backend_name() == "sqlite" else None
    if path is not None and not path.exists():
        shown = display_url(parsed)
        return Result(
            "database",
            "fail",
            f"{shown}: no database there (doctor creates none)",
            f"slurm-defrag db upgrade --db '{shown}' (or set db_url / SLURM_DEFRAG_DB_URL to "
            "the service's database)",
        )
    engine = make_engine(url)
    try:
        shown = display_url(engine.url)
        check_reachable(engine)
        rev, head = migrate.current(engine), migrate.head()
    finally:
        engine.dispose()
    upgrade = f"slurm-defrag db upgrade --db '{shown}'"
    if rev == head:
        return Result("database", "ok", f"{shown} is at revision {rev} (head)")
    if rev is None:
        return Result("database", "fail", f"{shown} has no slurm-defrag schema (base)", upgrade)
    if not migrate.is_known(rev):
        return Result(
            "database",
            "fail",
            f"{shown} is at revision {_one_line(rev, 40)}, newer than this slurm-defrag "
            f"(head {head})",
            "upgrade slurm-defrag to the version that migrated it",
        )
    return Result("database", "fail", f"{shown} is at revision {rev}, head is {head}", upgrade)


def _sqlite_file(url: URL) -> Path | None:
    """The file of a SQLite URL (None: in memory, or a ``file:`` URI left to SQLite)."""
    db = url.database
    if not db or db == ":memory:" or db.startswith("file:"):
        return None
    return Path(db).expanduser()


def check_clock(env: Env) -> Result:
    """This host's clock against slurmctld's (sdiag's answer time)."""
    before = env.clock()
    theirs = controller.server_time(env.controller)
    after = env.clock()
    rtt = (after - before).total_seconds()
    skew = (theirs - (before + (after - before) / 2)).total_seconds()
    slack = 1.0 + rtt / 2  # sdiag gives whole seconds
    excess = max(0.0, abs(skew) - slack)
    where = "ahead of" if skew > 0 else "behind"
    if excess <= CLOCK_WARN_S:
        return Result(
            "clock",
            "ok",
            f"slurmctld's clock agrees with this host's (within {slack + CLOCK_WARN_S:.0f} s)",
        )
    line = f"slurmctld's clock is {abs(skew):.0f} s {where} this host's"
    fix = "run NTP (chrony/systemd-timesyncd) on both hosts"
    return Result("clock", "fail" if excess > CLOCK_FAIL_S else "warn", line, fix)


def check_kill_switch(env: Env) -> Result:
    from slurm_defrag.actuator.killswitch import KillSwitch

    path = env.settings.kill_switch_file
    if path is None:
        return Result(
            "kill_switch",
            "warn",
            'no kill switch file configured: mode = "off" is the only way to stop action',
            "set kill_switch_file (default /etc/slurm-defrag/STOP)",
        )
    why = KillSwitch(path).engaged()
    if why:
        return Result(
            "kill_switch",
            "warn",
            f"{why}: the service reads and stores but takes no action",
            f"rm {path} when it may act",
        )
    return Result("kill_switch", "ok", f"not engaged (create {path} to stop all action)")


def check_mode(env: Env) -> Result:
    mode = env.settings.mode
    if mode == "enforce":
        return Result("mode", "ok", "mode enforce: plans are applied to Slurm")
    if mode == "dry-run":
        return Result(
            "mode",
            "ok",
            "mode dry-run: plans are made and recorded, nothing is changed in Slurm "
            '(set mode = "enforce" to act)',
        )
    return Result(
        "mode",
        "warn",
        "mode off: slurm-defrag reads and stores only, makes no plans",
        'set mode = "dry-run" (then "enforce")',
    )


# -- running them ------------------------------------------------------------------------

Check = Callable[[Env], Result]

SLURM_CHECKS: Sequence[tuple[str, Check]] = (
    ("slurm", check_slurm),
    ("backend", check_backend),
    ("rights", check_rights),
    ("topology", check_topology),
    ("job_submit", check_job_submit),
    ("route", check_route),
    ("queue_order", check_queue_order),
    ("epilog", check_epilog),
    ("clock", check_clock),
)
OTHER_CHECKS: Sequence[tuple[str, Check]] = (
    ("database", check_database),
    ("kill_switch", check_kill_switch),
    ("mode", check_mode),
)


def _guarded(name: str, check: Check, env: Env) -> tuple[Result, str | None]:
    """The check's result, and why Slurm cannot be reached (None: it answered)."""
    try:
        return check(env), None
    except DefragError as exc:
        down = None
        if isinstance(exc, SlurmCommandMissing):
            down = _missing(exc)
        elif isinstance(exc, SlurmUnavailableError):
            down = "Slurm is unreachable"
        return Result(name, "fail", _one_line(exc), _fix_for(exc)), down
    except Exception as exc:  # a doctor reports; it must not die on what it reads
        return (
            Result(
                name,
                "fail",
                f"could not check: {type(exc).__name__}: {_one_line(exc, 200)}",
                "report this with the Slurm version",
            ),
            None,
        )


def _missing(exc: SlurmCommandMissing) -> str:
    return f"{exc.command} {'does not exist' if '/' in exc.command else 'is not on PATH'}"


def _fix_for(exc: DefragError) -> str:
    from slurm_defrag.slurm.failures import SlurmParseError, SlurmRejectedError

    if isinstance(exc, SlurmCommandMissing):
        if exc.prefixed:
            return f"install {exc.command} here or fix [slurm] command_prefix"
        return (
            "install Slurm's client commands on this host or add their folder to PATH, or set "
            "[slurm] command_prefix to run them where they are (e.g. ssh HOST, docker exec "
            "CONTAINER)"
        )
    if isinstance(exc, SlurmUnavailableError):
        return "start slurmctld / check the command prefix, munge and the network"
    if isinstance(exc, SlurmRejectedError):
        return "check the account's rights and the backend settings"
    if isinstance(exc, SlurmParseError):
        return "report this output with the Slurm version"
    return "fix the setting the message names"


def run_checks(env: Env) -> list[Result]:
    """Every check, in order. When slurmctld does not answer, the checks that need it
    say so instead of each waiting for their own timeout."""
    results: list[Result] = []
    down: str | None = None
    for name, check in SLURM_CHECKS:
        if down is not None:
            results.append(Result(name, "skip", f"not checked: {down}"))
            continue
        r, why = _guarded(name, check, env)
        if why is not None and name in ("slurm", "backend"):
            down = why
        results.append(r)
    results.extend(_guarded(name, check, env)[0] for name, check in OTHER_CHECKS)
    return results


def exit_code(results: Sequence[Result]) -> int:
    """0 when nothing fails (enforce is safe to turn on), 1 otherwise (a ``skip`` is not a
    failure: the failure that caused it is one)."""
    return 1 if any(r.status == "fail" for r in results) else 0
