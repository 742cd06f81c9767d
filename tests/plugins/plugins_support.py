"""Helpers for the Slurm-side hook tests (slurm-plugins/); fixtures are in conftest.py.

Live tests (marker ``slurm``) install the hooks into the running compose cluster the way
slurm-plugins/INSTALL.md says, and put everything back afterwards:

* copy ``job_submit.lua``, ``epilog-slurmctld`` and a freshly rendered ``defrag_nodes.lua``
  into the slurmctld container's ``/etc/slurm``;
* add ``JobSubmitPlugins=lua``, ``EpilogSlurmctld=...`` and ``ignore_prefer_validation``
  to its slurm.conf (the original is kept on this host and copied back at the end, before
  any of our files is removed, so slurmctld can always start);
* ``scontrol reconfigure``; Slurm 22.05 only starts running a newly configured
  EpilogSlurmctld after a slurmctld restart, so there the container is restarted.

Run them while nobody else uses the cluster (CI runs tests one after another): a 22.05
install restarts slurmctld.

If the cluster already runs the hooks (JobSubmitPlugins=lua configured by the compose
files), slurm.conf is left alone and only the files are refreshed.

The container defaults to ``$CLUSTER_PREFIX-$SLURM_SUITE-slurmctld`` (scripts/cluster.sh;
prefix ``slurmdefrag``, the test suite's own cluster ``slurmdefrag-test``);
``SLURM_DEFRAG_TEST_CTLD`` names another one.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "slurm-plugins"
SUITE = os.environ.get("SLURM_SUITE", "bookworm")
PREFIX = os.environ.get("CLUSTER_PREFIX", "slurmdefrag")  # scripts/cluster.sh
CTLD = os.environ.get("SLURM_DEFRAG_TEST_CTLD", f"{PREFIX}-{SUITE}-slurmctld")
DOCKER = shutil.which("docker", path="/usr/bin:/usr/local/bin") or "/usr/bin/docker"
ETC = "/etc/slurm"
EPILOG_LOG = "/var/log/slurm-defrag-epilog.log"
BACKUP = f"{ETC}/slurm.conf.defrag-test-backup"


def require(available: bool, what: str) -> None:
    """tests/infra.py's require(): fail under CI=true, skip elsewhere."""
    from infra import require as gate

    gate(available, what)


# -- a stand-in for the service's trigger endpoint --------------------------------------


@dataclass
class Hit:
    at: float  # time.time() when the request arrived
    path: str
    body: str
    headers: dict[str, str] = field(default_factory=dict)


class TriggerListener:
    """A tiny HTTP server recording every POST, on all interfaces (containers reach it
    through their network gateway). ``hang=True`` accepts connections and never answers,
    like a wedged service."""

    def __init__(self, *, hang: bool = False, status: int = 202) -> None:
        self.hits: list[Hit] = []
        self._lock = threading.Lock()
        self._hang = hang
        if hang:
            self._sock = socket.create_server(("0.0.0.0", 0))
            self._sock.listen(64)
            self.port = self._sock.getsockname()[1]
            self._held: list[socket.socket] = []
            self._thread = threading.Thread(target=self._accept_forever, daemon=True)
        else:
            listener = self

            class Handler(BaseHTTPRequestHandler):
                def do_POST(self) -> None:
                    n = int(self.headers.get("Content-Length") or 0)
                    body = self.rfile.read(n).decode("utf-8", "replace")
                    with listener._lock:
                        listener.hits.append(
                            Hit(time.time(), self.path, body, dict(self.headers.items()))
                        )
                    self.send_response(status)
                    self.end_headers()

                def log_message(self, *args: object) -> None:
                    pass

            self._server = ThreadingHTTPServer(("0.0.0.0", 0), Handler)
            self.port = self._server.server_address[1]
            self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _accept_forever(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self._held.append(conn)

    def wait_for(self, needle: str, timeout_s: float) -> Hit | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                for hit in self.hits:
                    if needle in hit.body:
                        return hit
            time.sleep(0.02)
        return None

    def close(self) -> None:
        if self._hang:
            self._sock.close()
            for c in self._held:
                c.close()
        else:
            self._server.shutdown()
            self._server.server_close()


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.create_server(("0.0.0.0", 0)) as s:
        return int(s.getsockname()[1])


# -- the cluster -------------------------------------------------------------------------


@dataclass
class Cluster:
    """The slurmctld container, reached with ``docker exec``."""

    container: str = CTLD
    created_jobs: list[str] = field(default_factory=list)

    def run(
        self, *args: str, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [DOCKER, "exec", "-i", self.container, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}"
            )
        return proc

    def sh(self, script: str, check: bool = True, timeout: float = 60) -> str:
        return self.run("bash", "-c", script, check=check, timeout=timeout).stdout

    def is_up(self) -> bool:
        if not Path(DOCKER).exists():
            return False
        try:
            return "UP" in self.run("scontrol", "ping", check=False, timeout=20).stdout
        except (OSError, subprocess.TimeoutExpired):
            return False

    def cp_in(self, src: Path, dest: str, mode: int = 0o644) -> None:
        """Copy a host file in; works on a stopped container too (docker cp keeps the
        host file's mode, so no exec is needed)."""
        src.chmod(mode)
        subprocess.run(
            [DOCKER, "cp", str(src), f"{self.container}:{dest}"],
            check=True,
            capture_output=True,
            timeout=60,
        )

    def container_id(self) -> str:
        proc = subprocess.run(
            [DOCKER, "inspect", "-f", "{{.Id}}", self.container],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
        return proc.stdout.strip()

    def running(self) -> bool:
        proc = subprocess.run(
            [DOCKER, "inspect", "-f", "{{.State.Running}}", self.container],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
        return proc.stdout.strip() == "true"

    def cp_out(self, src: str, dest: Path) -> None:
        subprocess.run(
            [DOCKER, "cp", f"{self.container}:{src}", str(dest)],
            check=True,
            capture_output=True,
            timeout=60,
        )

    def gateway(self) -> str:
        """The host as seen from the container (its network's gateway)."""
        out = subprocess.run(
            [
                DOCKER,
                "inspect",
                "-f",
                "{{range .NetworkSettings.Networks}}{{.Gateway}} {{end}}",
                self.container,
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.split()
        assert out, f"{self.container} has no network gateway"
        return out[0]

    def config(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for line in self.run("scontrol", "show", "config").stdout.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                out[key.strip()] = value.strip()
        return out

    def version(self) -> tuple[int, int]:
        text = self.run("scontrol", "--version").stdout.split()[-1]
        major, minor = text.split(".")[:2]
        return int(major), int(minor)

    def responding_nodes(self) -> int:
        """Nodes slurmctld hears from (state not unknown, down or not responding)."""
        if not self.is_up():
            return 0
        out = self.sh("sinfo -h -N -o '%N %t' | sort -u", check=False)
        return sum(
            1
            for line in out.splitlines()
            if len(line.split()) == 2
            and not line.split()[1].endswith("*")
            and line.split()[1] not in ("unk", "down")
        )

    def wait_up(self, nodes: int, timeout_s: float = 150) -> None:
        """Until slurmctld answers and hears from at least ``nodes`` nodes again."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.responding_nodes() >= nodes:
                return
            time.sleep(1)
        raise AssertionError(f"{self.container}: slurmctld not back within {timeout_s:.0f} s")

    def restart(self, nodes: int | None = None) -> None:
        nodes = self.responding_nodes() if nodes is None else nodes
        subprocess.run(
            [DOCKER, "restart", self.container], check=True, capture_output=True, timeout=120
        )
        self.wait_up(nodes)

    def reconfigure(self) -> None:
        nodes = self.responding_nodes()
        proc = self.run("scontrol", "reconfigure", check=False)
        # 23.11+ reconfigure restarts slurmctld: wait until it answers again.
        time.sleep(1)
        if proc.returncode == 0:
            self.wait_up(nodes)
            return
        if "timed out" not in proc.stderr:
            raise AssertionError(f"scontrol reconfigure failed: {proc.stderr.strip()}")
        # Seen once in a full CI run (24.11, both cores busy): the reply timed out and
        # slurmctld never answered again, so every later test of the lane failed. The
        # slurm.conf on disk is the one wanted, so a restart gives what the reconfigure
        # would have; its log is kept in the warning, for the why.
        try:
            self.wait_up(nodes, timeout_s=60)
            return
        except AssertionError:
            pass
        warnings.warn(
            f"{self.container}: scontrol reconfigure timed out and slurmctld did not answer "
            f"within 60 s; restarting it. Its last log lines:\n{self.log_tail(40)}",
            stacklevel=2,
        )
        subprocess.run(
            [DOCKER, "restart", self.container], check=True, capture_output=True, timeout=120
        )
        self.wait_up(nodes)

    def log_tail(self, lines: int) -> str:
        proc = subprocess.run(
            [DOCKER, "logs", "--tail", str(lines), self.container],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
        return (proc.stdout + proc.stderr).strip()

    def sbatch(self, *opts: str, wrap: str = "sleep 300") -> tuple[int, str, str]:
        """(rc, job id or "", stderr). Jobs are named defrag-plugin-test for cleanup."""
        proc = self.run(
            "sbatch", "--parsable", "-J", "defrag-plugin-test", *opts, "--wrap", wrap, check=False
        )
        job = proc.stdout.strip().split(";")[0]
        if proc.returncode == 0 and job:
            self.created_jobs.append(job)
        return proc.returncode, job, proc.stderr.strip()

    def job_field(self, job: str, name: str) -> str:
        """One field of ``scontrol show job`` (AdminComment may contain spaces)."""
        text = self.run("scontrol", "-o", "show", "job", job).stdout
        fields = _split_fields(text)
        return fields.get(name, "")

    def cleanup_jobs(self) -> None:
        if self.created_jobs:
            self.run("scancel", *self.created_jobs, check=False)
            self.created_jobs.clear()


def reload_script(c: Cluster) -> None:
    """What a new cycle does: slurmctld reloads the script (and the table) on the next
    submission when the script's mtime changed."""
    time.sleep(1.1)  # mtime has whole seconds on some file systems
    c.run("touch", f"{ETC}/job_submit.lua")


@contextmanager
def table_with(c: Cluster, tmp: Path, entry: str) -> Iterator[None]:
    """The installed defrag_nodes.lua with ``entry`` (Lua, ending in a comma) added to its
    return table, reloaded; the rendered table is put back (and reloaded) afterwards."""
    original = tmp / "defrag_nodes.lua"
    c.cp_out(f"{ETC}/defrag_nodes.lua", original)
    text = original.read_text(encoding="utf-8").rstrip()
    assert text.endswith("}"), "the rendered table does not end its return table"
    extended = tmp / "extended.lua"
    extended.write_text(text[:-1] + entry + "}\n", encoding="utf-8")
    try:
        c.cp_in(extended, f"{ETC}/defrag_nodes.lua")
        reload_script(c)
        yield
    finally:
        c.cleanup_jobs()
        c.cp_in(original, f"{ETC}/defrag_nodes.lua")
        reload_script(c)


def pack_entry(feature: str, partitions: tuple[str, ...] = ("batch", "high")) -> str:
    """A ``pack`` entry for :func:`table_with`: the packing hint naming ``feature``, which
    the test has put on a node of ``partitions`` (the compose cluster's slurm.conf gives
    its nodes no features, so the rendered table has no hint)."""
    names = ", ".join(f'"{p}"' for p in partitions)
    return f'  pack = {{ feature = "{feature}", max_gpus = 4, partitions = {{ {names} }} }},\n'


def set_node_features(c: Cluster, node: str, features: list[str]) -> None:
    """Set a node's available and active features, as the service's levers do."""
    value = ",".join(features)
    c.run(
        "scontrol",
        "update",
        f"NodeName={node}",
        f"AvailableFeatures={value}",
        f"ActiveFeatures={value}",
    )


def own_features(text: str) -> list[str]:
    """A node's AvailableFeatures as ``scontrol`` prints them, "(null)" for none."""
    return [f for f in text.split(",") if f and f != "(null)"]


def _split_fields(line: str) -> dict[str, str]:
    """``scontrol -o`` output into fields; a value runs until the next ``Key=``.

    AdminComment and Comment may contain spaces, so a plain split would cut them.
    """
    out: dict[str, str] = {}
    # keys look like NodeList=, Socks/Node=, NtasksPerN:B:S:C=; our own defrag:key=value
    # tokens inside AdminComment are not keys
    matches = list(re.finditer(r"(?:^|\s)(?!defrag:)([A-Za-z][A-Za-z0-9_:/]*)=", line))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        out.setdefault(m[1], line[m.end() : end].strip())
    return out


@dataclass
class Installed:
    cluster: Cluster
    listener: TriggerListener
    url: str
    changed_conf: bool


def with_hook_lines(conf: str) -> str:
    """slurm.conf text with the lines INSTALL.md adds (idempotent)."""
    lines = conf.splitlines()
    is_sched = re.compile(r"(?i)^\s*SchedulerParameters\s*=")
    sched = [i for i, line in enumerate(lines) if is_sched.match(line)]
    if sched:
        i = sched[-1]
        if "ignore_prefer_validation" not in lines[i]:
            key, _, value = lines[i].partition("=")
            value = value.strip()
            lines[i] = f"{key}={value + ',' if value else ''}ignore_prefer_validation"
    else:
        lines.append("SchedulerParameters=ignore_prefer_validation")
    if not any(re.match(r"(?i)^\s*JobSubmitPlugins\s*=", line) for line in lines):
        lines.append("JobSubmitPlugins=lua")
    if not any(re.match(r"(?i)^\s*EpilogSlurmctld\s*=", line) for line in lines):
        lines.append(f"EpilogSlurmctld={ETC}/epilog-slurmctld")
    return "\n".join(lines) + "\n"


def set_epilog_url(cluster: Cluster, url: str, tmp: Path) -> None:
    conf = tmp / "defrag-epilog.conf"
    conf.write_text(
        "# written by tests/plugins (live tests)\n"
        f"DEFRAG_TRIGGER_URL={url}\n"
        "DEFRAG_TRIGGER_TIMEOUT=1\n"
        f"DEFRAG_EPILOG_LOG={EPILOG_LOG}\n",
        encoding="utf-8",
    )
    cluster.cp_in(conf, f"{ETC}/defrag-epilog.conf")
