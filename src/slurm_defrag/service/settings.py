"""Service settings: a TOML file, then ``SLURM_DEFRAG_*`` environment variables on top.

Groups nest the existing settings: ``[slurm]`` is :class:`SlurmSettings` (environment
``SLURM_DEFRAG_SLURM__BACKEND`` here, with the double underscore of nested settings),
``[solver]`` overrides the policy file's ``[solver]`` table when given.

Fails closed: a config file that is named (``--config`` or ``SLURM_DEFRAG_CONFIG``) but
missing or unreadable is an error, as is an unknown key in any table and an empty path.
Environment variables are looked up by setting name, so a ``SLURM_DEFRAG_*`` variable that
names no setting is not read (the prefix is shared with ``SLURM_DEFRAG_DB_URL`` of the
store, ``SLURM_DEFRAG_SLURM_*`` of the Slurm settings and test variables); an unknown key
under a nested table's variables (``SLURM_DEFRAG_SLURM__BAKEND``) is an error.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    IPvAnyNetwork,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from slurm_defrag.config_files import NonEmptyPath, one_line, parse_toml, read_text
from slurm_defrag.errors import InputError
from slurm_defrag.slurm.connection import SlurmSettings, environment_names
from slurm_defrag.solver.parameters import SolverSettings

Mode = Literal["off", "dry-run", "enforce"]

CONFIG_ENV = "SLURM_DEFRAG_CONFIG"

_CONFIG_OPTION: ContextVar[Path | None] = ContextVar("config_option", default=None)
"""The ``--config`` file of the :func:`load` call being made (it beats the environment)."""


def _holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


ENV_PREFIX = "SLURM_DEFRAG_"


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        allow_inf_nan=False,
    )

    mode: Mode = "dry-run"
    """``off``: read and store only; ``dry-run``: plans made, executed against an
    in-memory copy of Slurm and stored, nothing changed; ``enforce``: plans applied.
    Default ``dry-run`` so a fresh install never acts by surprise."""

    interval_s: Annotated[float, Field(gt=0)] = 60.0
    """Seconds between cycles. Default 60 s."""

    misfire_grace_s: Annotated[float, Field(gt=0)] = 30.0
    """A cycle that could not start on time (previous one still running) still runs if
    late by at most this many seconds; later ones are coalesced into one. Default 30 s."""

    plan_ttl_s: Annotated[float, Field(gt=0)] = 900.0
    """Seconds a plan may stay in flight (victims leaving, target starting) before it is
    rolled back. Also the reservation's duration. Default 900 s (15 min)."""

    policy: NonEmptyPath | None = None
    """Policy file (TOML/YAML, ``docs/policy.md``). Default: the built-in default policy."""

    db_url: str | None = None
    """Database URL (``sqlite:///PATH`` or ``postgresql+psycopg://...``). Default: the
    store's default (``SLURM_DEFRAG_DB_URL`` or the embedded SQLite file)."""

    slurm: SlurmSettings = Field(default_factory=SlurmSettings)
    """How to reach Slurm (``[slurm]`` table): backend, command prefix, topology."""

    solver: SolverSettings | None = None
    """Solver settings overriding the policy's ``[solver]`` table. Default: the policy's."""

    kill_switch_file: NonEmptyPath | None = Path("/etc/slurm-defrag/STOP")
    """While this file exists the service takes no action (it still reads and stores).
    Default ``/etc/slurm-defrag/STOP``; ``""`` in TOML is not allowed, omit to keep it."""

    packing: bool = False
    """Steer new small jobs onto nodes already in use by raising the ``Weight`` of GPU
    nodes whose GPUs are all free (enforce mode). Original weights are recorded and put
    back when this is switched off or the service stops. Default off."""

    packing_weight_bump: Annotated[int, Field(ge=1, le=1_000_000)] = 1000
    """Added to a whole-free node's original weight while packing. Default 1000."""

    packing_lever: Literal[
        "idle-bump", "size-weights", "shape-weights", "fgd-route-score", "fgd-route"
    ] = "idle-bump"
    """How packing sets ``Weight`` (none needs the job_submit plugin): ``idle-bump`` adds
    ``packing_weight_bump`` to whole-free GPU nodes; ``size-weights`` makes every GPU
    node's Weight ``original x 4096 + its GPU count``, so that, within the admin's order,
    Slurm fills nodes with fewer GPUs first and the 8-GPU nodes empty for whole-node jobs
    (docs/benchmarks.md, "Node size as Weight"); ``shape-weights`` uses the node's rank by
    (GPUs, CPUs, memory) instead of its GPU count, so the few largest nodes of a size also
    stay free for the jobs only they can hold (docs/benchmarks.md, "Node shape as
    Weight"); ``fgd-route-score`` decides per job: every node gets its own feature
    (``defrag_at_<node>``) and every cycle the service writes the nodes' free resources
    and the workload mix (counted from the jobs it sees) to ``route_file``, from which
    job_submit.lua names, for each one-node job, the node where it raises FGD
    fragmentation least (``--prefer``; docs/service.md, "Per-job routing");
    ``fgd-route`` is the same with the simulator's ``packing`` tie-breaks. Default
    ``idle-bump``."""

    route_file: NonEmptyPath | None = None
    """``fgd-route*`` levers: the file the route is written to every cycle, on the
    slurmctld host's local disk, readable by SlurmUser; the same path as ``route_file``
    in defrag_nodes.lua (``slurm-defrag plugins render --route-file``). Required by those
    levers. Default: none."""

    lease_ttl_s: Annotated[float, Field(gt=0)] = 30.0
    """Leader lease lifetime in seconds; a dead leader is replaced after at most this.
    Renewed at every cycle and every ``lease_ttl_s / 3``. Default 30 s."""

    holder_id: str = Field(default_factory=_holder)
    """This instance's name in the lease. Default ``<hostname>:<pid>``."""

    http_host: str = "127.0.0.1"
    """Address of the trigger/health endpoint. Default 127.0.0.1 (local only: the
    slurmctld epilog runs on the same host)."""

    http_port: Annotated[int, Field(ge=0, le=65535)] = 8787
    """Port of ``POST /trigger`` and ``GET /healthz``; 0 disables the server. Default 8787."""

    http_allow: list[IPvAnyNetwork] = Field(default_factory=list)
    """Networks (CIDR, e.g. ``["10.1.0.0/16"]``) served besides loopback, which always is.
    Every other client is disconnected without an answer, ``/trigger`` included. Default:
    none (loopback only), whatever ``http_host`` listens on."""

    http_names: list[str] = Field(default_factory=list)
    """Host names the endpoint may be reached by (e.g. ``["slurmctl1"]`` for a Prometheus
    scraping ``slurmctl1:8787``) besides IP addresses, ``localhost`` and ``http_host``;
    any other ``Host`` header gets 403 (DNS rebinding). Default: none."""

    trigger_min_interval_s: Annotated[float, Field(ge=0, le=3600)] = 5.0
    """``POST /trigger`` starts a cycle at least this many seconds after the previous cycle
    started; triggers meanwhile are coalesced into one pending cycle (``docs/service.md``).
    Default 5 s."""

    trigger_secret_file: Path | None = None
    """File holding a shared secret that ``POST /trigger`` must send in the
    ``X-Defrag-Trigger-Secret`` header (403 without it). The epilog reads the same file
    (``DEFRAG_TRIGGER_SECRET_FILE``). Default: none, any local client may trigger."""

    web: bool = False
    """Serve the read-only web page (GPU map, history, plans) at ``/`` on the HTTP endpoint
    (``docs/web.md``). Needs ``http_port`` other than 0. Default off."""

    metrics: bool = True
    """Serve Prometheus metrics at ``GET /metrics`` on the HTTP endpoint
    (``docs/observability.md``). Default on; without ``http_port`` there is no endpoint.
    """

    log_json: bool = False
    """One JSON object per log line (for journald/Loki). Default: plain text lines."""

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    """Log level. Default INFO."""

    test_crash_after: str | None = None
    """Tests only: ``<step kind>`` (e.g. ``requeue``) or ``<kind>:recorded`` makes the
    process exit with status 137 right after that step acted on Slurm (before or after
    it is recorded done), as ``kill -9`` would. Default: none."""

    @field_validator("route_file")
    @classmethod
    def _route_file_absolute(cls, path: Path | None) -> Path | None:
        if path is not None and not path.is_absolute():
            raise ValueError(f"{str(path)!r} must be an absolute path (slurmctld reads it too)")
        return path

    @model_validator(mode="after")
    def _route_needs_its_file(self) -> ServiceSettings:
        if self.packing and self.packing_lever.startswith("fgd-route") and not self.route_file:
            raise ValueError(
                f"route_file: packing_lever {self.packing_lever} writes its route there"
                " for job_submit.lua; set it (the path of route_file in defrag_nodes.lua)"
            )
        return self

    @field_validator("web")
    @classmethod
    def _web_needs_http(cls, web: bool, info: ValidationInfo) -> bool:
        if web and info.data.get("http_port") == 0:  # http_port is validated before web
            raise ValueError("the web page needs the HTTP endpoint: set http_port (not 0)")
        return web

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Precedence, strongest first: constructor (CLI options), environment, TOML file.
        # The Slurm settings' own variables (SLURM_DEFRAG_SLURM_BACKEND, what the commands
        # read) count as environment too: without their source a [slurm] table in the file
        # would hide them (the nested model is then built from the file's table alone).
        sources: list[PydanticBaseSettingsSource] = [init_settings]
        if environment_names(ENV_PREFIX):  # else both read nothing (see there)
            sources += [env_settings, _SlurmOwnEnvironment(settings_cls)]
        file_data = _config_file_data()
        if file_data is not None:
            sources.append(InitSettingsSource(settings_cls, init_kwargs=file_data))
        return tuple(sources)


class _SlurmOwnEnvironment(PydanticBaseSettingsSource):
    """``SLURM_DEFRAG_SLURM_<KEY>`` as ``{"slurm": {...}}`` (merged into the file's table)."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads the whole model at once

    def __call__(self) -> dict[str, Any]:
        found = EnvSettingsSource(SlurmSettings)()
        return {"slurm": found} if found else {}


def origins(settings: ServiceSettings, keys: Sequence[str], config: Path | None = None) -> str:
    """Where the values of ``keys`` came from, for a message: their environment variables,
    the config file (``config``, else ``$SLURM_DEFRAG_CONFIG``), or the defaults."""
    file = config or (Path(env) if (env := os.environ.get(CONFIG_ENV)) else None)
    found = []
    for key in keys:
        var = f"{ENV_PREFIX}{key.upper()}"
        if var in os.environ:
            found.append(var)
        elif key in settings.model_fields_set and file is not None:
            found.append(f"{key} in {file}")
    if found:
        return ", ".join(found)
    names = "/".join(f"{ENV_PREFIX}{k.upper()}" for k in keys)
    return f"{'/'.join(keys)} (defaults; set them in the config file or {names})"


def config_file() -> tuple[Path, str] | None:
    """The config file to read and where it was named (``--config`` or the variable)."""
    option = _CONFIG_OPTION.get()
    if option is not None:
        return option, "--config"
    env = os.environ.get(CONFIG_ENV)
    return (Path(env), CONFIG_ENV) if env else None  # set but empty: no file, as unset


def _config_file_data() -> dict[str, Any] | None:
    found = config_file()
    if found is None:
        return None
    path, origin = found
    data = parse_toml(read_text(path, origin), path)
    if not isinstance(data, dict):  # pragma: no cover - tomllib always gives a table
        raise InputError(f"{path}: expected a table of settings")
    return data


def _key(loc: Sequence[int | str]) -> str:
    # Dotted, list indices too (``http_allow.0``); keys a user typed are escaped to one line.
    return one_line(".".join(str(p) for p in loc)) or "(top level)"


def load(config: Path | None = None, **overrides: object) -> ServiceSettings:
    """Settings from ``config`` (TOML; default ``$SLURM_DEFRAG_CONFIG``, else none), the
    environment and ``overrides`` (non-None).

    Raises :class:`InputError` naming every bad key at once.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    token = _CONFIG_OPTION.set(config)
    try:
        return ServiceSettings(**given)  # type: ignore[arg-type]
    except SettingsError as exc:  # an environment variable that is not valid JSON
        raise InputError(f"environment: {one_line(str(exc))} (lists are JSON)") from None
    except ValidationError as exc:
        errs = [
            _key(e["loc"])
            + ": "
            + (
                "unknown key"
                if e["type"] == "extra_forbidden"
                else one_line(e["msg"].removeprefix("Value error, "))
            )
            for e in exc.errors(include_url=False)
        ]
        found = config_file()
        raise InputError(f"{found[0] if found else 'settings'}: " + "; ".join(errs)) from None
    finally:
        _CONFIG_OPTION.reset(token)
