"""The slurm-defrag service as its own container beside slurmctld, for live tests.

Each instance is a one-off container of the compose ``defrag`` service
(``docker-compose run``, so it gets exactly that service's image, network namespace —
slurmctld's — and settings file), named ``slurmdefrag-$SLURM_SUITE-defrag-<tag>``. Settings
are ``SLURM_DEFRAG_<KEY>`` environment variables on top of docker/defrag/service.toml, so a
test says only what differs::

    db = scratch_database()                       # fresh schema on the compose PostgreSQL
    svc = ServiceContainer.start("a", db, mode="enforce", interval_s=4, lease_ttl_s=8)
    svc.wait_healthy()
    svc.trigger(); svc.health(); svc.logs()
    svc.kill()                                    # docker kill -s KILL (exit 137)
    svc.restart()                                 # docker start: same container, same settings
    svc.restart(test_crash_after=None)            # a new container, settings changed
    svc.stop()                                    # SIGTERM, returns the exit code
    svc.remove(); db.drop()

Settings: any :class:`slurm_defrag.service.settings.ServiceSettings` key as a keyword
(``slurm__command_timeout_s`` for nested ones; ``None`` leaves a key at the file's value).
``files`` mounts host files read-only (container path -> host path), e.g. a policy.
``user`` is the Unix user the service runs as (default ``defrag``, a Slurm Operator; node
drain/resume and weights need ``root``). Every container of one suite shares slurmctld's
network namespace, so two instances need different ``http_port`` values (:func:`free_port`).

The image is built by ``scripts/cluster.sh build`` (or ``scripts/cluster.sh defrag build``);
:func:`image_ready` says whether it is there. Containers are removed by :meth:`remove`;
:func:`remove_all` removes every one this module made for the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from slurm_defrag.store import migrate
from slurm_defrag.store.engine import make_engine

try:
    from live_cluster import CTLD, DOCKER, PROJECT, ROOT, SUITE, container
except ModuleNotFoundError:  # imported as e2e.service_container (tests/plugins)
    from e2e.live_cluster import CTLD, DOCKER, PROJECT, ROOT, SUITE, container

COMPOSE = "/usr/bin/docker-compose"
IMAGE = f"slurm-defrag/defrag:{SUITE}"
PREFIX = container("defrag-")
LABEL = "slurm-defrag.test-service"
DEFAULT_PORT = 8787
POSTGRES_PORT = int(os.environ.get("POSTGRES_PORT", "55432"))
HOST_DB_SERVER = f"postgresql+psycopg://defrag:defrag@127.0.0.1:{POSTGRES_PORT}/defrag"
CONTAINER_DB_SERVER = "postgresql+psycopg://defrag:defrag@postgres:5432/defrag"


def _docker(*args: str, timeout: float = 120, check: bool = True) -> str:
    proc = subprocess.run(
        [DOCKER, *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"docker {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}"
        )
    return proc.stdout


def image_ready() -> bool:
    """Whether the service image of this suite exists (``scripts/cluster.sh build``)."""
    try:
        proc = subprocess.run(
            [DOCKER, "image", "inspect", IMAGE], capture_output=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


# -- database ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Database:
    """A scratch database on the compose PostgreSQL, reachable from the host and from the
    service containers under different addresses."""

    name: str

    def _on(self, server: str) -> str:
        return make_url(server).set(database=self.name).render_as_string(hide_password=False)

    @property
    def host_url(self) -> str:
        return self._on(HOST_DB_SERVER)

    @property
    def container_url(self) -> str:
        return self._on(CONTAINER_DB_SERVER)

    def drop(self) -> None:
        _server_sql(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def _server_sql(statement: str) -> None:
    """One statement outside a transaction (CREATE/DROP DATABASE) on the compose server."""
    admin = create_engine(HOST_DB_SERVER, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(statement))
    finally:
        admin.dispose()


def scratch_database() -> Database:
    """A new database with the current schema (upgraded here, once: instances started
    together would otherwise race to create it)."""
    db = Database(f"defrag_live_{uuid.uuid4().hex[:10]}")
    _server_sql(f'CREATE DATABASE "{db.name}"')
    engine = make_engine(db.host_url)
    try:
        migrate.upgrade(engine)
    finally:
        engine.dispose()
    return db


# -- ports in slurmctld's network namespace ---------------------------------------------------


def listening_ports() -> set[int]:
    """TCP ports something listens on in slurmctld's network namespace (= the services')."""
    out = _docker("exec", CTLD, "cat", "/proc/net/tcp", "/proc/net/tcp6", timeout=30)
    ports = set()
    for line in out.splitlines()[1:]:
        cols = line.split()
        if len(cols) > 3 and cols[3] == "0A" and ":" in cols[1]:  # 0A = LISTEN
            ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def free_port(start: int = 18700) -> int:
    """A port free in slurmctld's network namespace (for a second instance's endpoint)."""
    taken = listening_ports()
    return next(p for p in range(start, start + 1000) if p not in taken)


# -- the service container -------------------------------------------------------------------


@dataclass
class ServiceContainer:
    """One service instance; see the module docstring."""

    tag: str
    db: Database
    settings: dict[str, object] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    user: str = "defrag"

    @property
    def name(self) -> str:
        return f"{PREFIX}{self.tag}"

    @property
    def port(self) -> int:
        return int(str(self.settings.get("http_port", DEFAULT_PORT)))

    @classmethod
    def start(
        cls,
        tag: str,
        db: Database,
        *,
        files: dict[str, Path] | None = None,
        user: str = "defrag",
        **settings: object,
    ) -> ServiceContainer:
        """Create and start the container ``slurmdefrag-<suite>-defrag-<tag>`` (an old
        one of that name is removed first)."""
        svc = cls(
            tag, db, {k: v for k, v in settings.items() if v is not None}, dict(files or {}), user
        )
        svc._create()
        return svc

    def _env(self) -> dict[str, str]:
        # No holder id: the entrypoint makes a new one at every start, so a restarted
        # instance is a new lease holder, as after a real crash.
        env = {"SLURM_DEFRAG_DB_URL": self.db.container_url, "DEFRAG_USER": self.user}
        for key, value in self.settings.items():
            env[f"SLURM_DEFRAG_{key.upper()}"] = (
                value if isinstance(value, str) else json.dumps(value)
            )
        return env

    def _create(self) -> None:
        self.remove()
        argv = [
            COMPOSE,
            "-p",
            PROJECT,
            "-f",
            str(ROOT / "docker-compose.yml"),
            "run",
            "-d",
            "--no-deps",
            "--name",
            self.name,
            "--label",
            f"{LABEL}={SUITE}",
        ]
        for key, value in self._env().items():
            argv += ["-e", f"{key}={value}"]
        for inside, host in self.files.items():
            argv += ["-v", f"{Path(host).resolve()}:{inside}:ro"]
        env = {**os.environ, "SLURM_SUITE": SUITE, "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"}
        proc = subprocess.run(
            [*argv, "defrag"],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
            env=env,
            cwd=ROOT,
        )
        if proc.returncode != 0:
            raise AssertionError(f"starting {self.name} failed: {proc.stderr.strip()}")

    # -- life cycle --------------------------------------------------------------------------

    def running(self) -> bool:
        out = _docker("inspect", "-f", "{{.State.Running}}", self.name, check=False, timeout=30)
        return out.strip() == "true"

    def exit_code(self) -> int | None:
        """The exit code once the container has stopped, else None."""
        out = _docker(
            "inspect", "-f", "{{.State.Running}} {{.State.ExitCode}}", self.name, timeout=30
        ).split()
        return None if out[0] == "true" else int(out[1])

    def wait_exit(self, timeout_s: float = 120) -> int:
        deadline = time.monotonic() + timeout_s
        while (code := self.exit_code()) is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} still running after {timeout_s:g} s")
            time.sleep(1)  # each probe is a docker inspect (~0.1 s of CPU)
        return code

    def stop(self, timeout_s: int = 60) -> int:
        """SIGTERM (the service finishes its cycle and releases the lease); the exit code."""
        _docker("stop", "-t", str(timeout_s), self.name, timeout=timeout_s + 30)
        return self.wait_exit(10)

    def kill(self) -> int:
        """``docker kill -s KILL``: no clean-up at all, as a crash; the exit code (137)."""
        _docker("kill", "-s", "KILL", self.name, check=False)
        return self.wait_exit(30)

    def restart(self, **changes: object) -> None:
        """Start it again after it stopped. Without ``changes``: the same container
        (``docker start``), as a restart policy would. With them (``None`` drops a key): a
        new container of the same name with the settings changed."""
        if not changes:
            if self.running():
                _docker("restart", "-t", "60", self.name, timeout=120)
            else:
                _docker("start", self.name)
            return
        for key, value in changes.items():
            if value is None:
                self.settings.pop(key, None)
            else:
                self.settings[key] = value
        self._create()

    def remove(self) -> None:
        _docker("rm", "-f", self.name, check=False)

    # -- what it says ------------------------------------------------------------------------

    def logs(self) -> str:
        proc = subprocess.run(
            [DOCKER, "logs", self.name],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=60,
            check=False,
        )
        return proc.stdout

    def _curl(self, *args: str) -> tuple[int, str]:
        proc = subprocess.run(
            [
                DOCKER,
                "exec",
                self.name,
                "curl",
                "-s",
                "--max-time",
                "5",
                "-o",
                "-",
                "-w",
                "\n%{http_code}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        body, _, code = proc.stdout.rpartition("\n")
        return (int(code) if code.isdigit() else 0), body

    def health(self) -> dict[str, object] | None:
        """``GET /healthz`` from inside (the endpoint is local-only); None if no answer."""
        code, body = self._curl(f"http://127.0.0.1:{self.port}/healthz")
        return json.loads(body) if code in (200, 503) else None

    def trigger(self) -> int:
        """``POST /trigger`` as the epilog does; the HTTP status (0: no answer)."""
        return self._curl("-X", "POST", f"http://127.0.0.1:{self.port}/trigger")[0]

    def wait_healthy(self, timeout_s: float = 120) -> dict[str, object]:
        """Until ``/healthz`` answers (the endpoint is bound once the service runs)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if (health := self.health()) is not None:
                return health
            if self.exit_code() is not None:
                raise AssertionError(
                    f"{self.name} exited ({self.exit_code()}):\n{self.logs()[-3000:]}"
                )
            time.sleep(1)  # each probe: a docker exec and a docker inspect
        raise AssertionError(
            f"{self.name}: no /healthz after {timeout_s:g} s:\n{self.logs()[-3000:]}"
        )


def remove_all() -> None:
    """Remove every service container this module started for the suite."""
    ids = _docker("ps", "-aq", "--filter", f"label={LABEL}={SUITE}", check=False).split()
    if ids:
        _docker("rm", "-f", *ids, check=False)
