"""How slurm-defrag reaches Slurm: backend choice and its connection details.

Every field can be set from the environment with the prefix ``SLURM_DEFRAG_SLURM_`` (for
example ``SLURM_DEFRAG_SLURM_BACKEND=rest``); lists and mappings are given as JSON
(``SLURM_DEFRAG_SLURM_COMMAND_PREFIX='["docker","exec","slurmdefrag-bookworm-slurmctld"]'``).
Command-line options override the environment. Unknown keys (in the service config's
``[slurm]`` table, or ``SLURM_DEFRAG_SLURM__*`` variables of the service) are errors; a
``SLURM_DEFRAG_SLURM_*`` variable that names no setting is not read.
"""

from __future__ import annotations

import os
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from slurm_defrag.config_files import NonEmptyPath, read_text
from slurm_defrag.domain.topology import BUILTIN_TOPOLOGIES

Backend = Literal["cli", "rest", "pyslurm"]


ENV_PREFIX = "SLURM_DEFRAG_SLURM_"


def environment_names(prefix: str) -> bool:
    """Whether any environment variable starts with ``prefix`` (any case: the settings
    sources compare names case-insensitively). Without one an environment source reads
    nothing, and skipping it makes a settings load several times cheaper: it inspects
    every field's annotation each time (the config fuzz tests load 20,000 files)."""
    return any(k.upper().startswith(prefix) for k in os.environ)


class SlurmSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", allow_inf_nan=False)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # No .env file and no secrets directory are configured: those two read nothing.
        if environment_names(ENV_PREFIX):
            return init_settings, env_settings
        return (init_settings,)

    backend: Backend = "cli"
    """Which adapter reads and writes Slurm: ``cli`` (scontrol/squeue/sinfo, default),
    ``rest`` (slurmrestd) or ``pyslurm`` (optional extra ``slurm-defrag[pyslurm]``)."""

    # -- cli backend -------------------------------------------------------------------
    command_prefix: list[str] = Field(default_factory=list)
    """argv prepended to every Slurm command, e.g. ``["docker", "exec", "CONTAINER"]`` to
    run them inside the slurmctld container, or ``["sudo", "-n"]``. Default: none."""

    command_timeout_s: float = Field(default=30.0, gt=0)
    """Seconds one Slurm command may run before the read counts as "Slurm unavailable".
    Default 30 s (slurmctld's own MessageTimeout default is 10 s, plus retries)."""

    cross_check_text: bool = True
    """cli backend: also read ``scontrol show job -d`` and fail if its per-node GPU indices
    disagree with the JSON for the same allocation. Default on (one extra command)."""

    # -- rest backend ------------------------------------------------------------------
    rest_url: str = "http://127.0.0.1:6820"
    """slurmrestd base URL (``http://host:port``). Ignored when ``rest_socket`` is set.
    Default ``http://127.0.0.1:6820``."""

    rest_socket: NonEmptyPath | None = None
    """slurmrestd unix socket path; when set, requests go over this socket instead of TCP.
    Default: none (use ``rest_url``)."""

    rest_user: str = "root"
    """User name sent as ``X-SLURM-USER-NAME`` with the JWT. Default ``root``."""

    rest_token: SecretStr | None = None
    """JWT sent as ``X-SLURM-USER-TOKEN``. Default: none (then ``rest_token_file``, then no
    auth headers, which suits ``rest_auth/local`` on a unix socket)."""

    rest_token_file: NonEmptyPath | None = None
    """File holding the JWT (``SLURM_JWT=`` prefix allowed), read at every request so a
    rotated token is picked up. Default: none."""

    rest_api_version: str | None = Field(
        default=None, pattern=r"^v[0-9]{1,4}\.[0-9]{1,4}\.[0-9]{1,4}$"
    )
    """Pin the API version (e.g. ``v0.0.38``). Default: none = discover, newest first."""

    rest_timeout_s: float = Field(default=30.0, gt=0)
    """Seconds per HTTP request. Default 30 s."""

    # -- topology and naming (all backends) --------------------------------------------
    # Topology sources, first one that covers a node wins (docs/service.md, "Topology
    # sources"): gres.conf, topology_map, topology_dir, topology_templates. A GPU node none
    # covers is shown as "unknown" (and never offered to an NVLink job).
    gres_conf: NonEmptyPath | None = None
    """gres.conf whose ``Links=`` rows give each node's NVLink topology. Slurm never
    reports Links= in its output, so the file is read. Default: none (then the cli backend
    reads the gres.conf beside Slurm's slurm.conf, see ``discover_gres_conf``)."""

    discover_gres_conf: bool = True
    """cli backend, when ``gres_conf`` is not set: read ``gres.conf`` in the directory of
    Slurm's ``SLURM_CONF`` (from ``scontrol show config``) with ``cat``, run like scontrol
    (through ``command_prefix``). A missing file is no error, just no source. Default on;
    the rest and pyslurm backends only use the explicit settings."""

    topology_map: NonEmptyPath | None = None
    """YAML or JSON file ``{"nodes": {HOSTLIST: {"template": NAME} | {"links": ROWS}}}``;
    ROWS as gres.conf ``Links=`` (-1 self, 0 none, >0 NVLinks). Default: none."""

    topology_dir: NonEmptyPath | None = None
    """Directory of ``<node>.json`` files written by a topology collector (format
    ``slurm-defrag-topology/1``). Default: none."""

    topology_templates: dict[str, str] = Field(default_factory=dict)
    """Hostlist -> built-in topology name, the last source, e.g.
    ``{"gpu[001-064]": "nvswitch-8"}``. Default: none."""

    topology_conf: NonEmptyPath | None = None
    """topology.conf whose ``BlockName=`` lines are the multi-node NVLink domains (NVL72
    racks), for every backend. Default: none (cli reads ``scontrol show topology`` under
    topology/block; rest and pyslurm, which cannot see blocks, then have no domains)."""

    cluster_name: str | None = None
    """Cluster name recorded in snapshots. Default: what Slurm reports, else ``cluster``."""

    @field_validator("topology_templates")
    @classmethod
    def _known_templates(cls, v: dict[str, str]) -> dict[str, str]:
        unknown = sorted({t for t in v.values() if t not in BUILTIN_TOPOLOGIES})
        if unknown:
            raise ValueError(
                f"unknown topology template {unknown[0]!r}; built-in templates are: "
                + ", ".join(sorted(BUILTIN_TOPOLOGIES))
            )
        return v

    def token(self) -> str | None:
        """The JWT from ``rest_token`` or ``rest_token_file`` (None = send no token)."""
        if self.rest_token is not None:
            return self.rest_token.get_secret_value().strip() or None
        if self.rest_token_file is not None:
            # InputError (one line naming the file) when missing, unreadable or not UTF-8.
            text = read_text(self.rest_token_file, "rest_token_file").strip()
            return text.removeprefix("SLURM_JWT=").strip() or None
        return None


def load_settings(**overrides: object) -> SlurmSettings:
    """Settings from the environment, with the given (non-None) overrides on top.

    A bad value becomes one :class:`InputError` line naming the variable, not a traceback.
    """
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from slurm_defrag.config_files import one_line
    from slurm_defrag.errors import InputError

    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return SlurmSettings(**given)  # type: ignore[arg-type]
    except SettingsError as exc:  # a list/mapping variable that is not valid JSON
        raise InputError(f"environment: {one_line(str(exc))} (lists are JSON)") from None
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        name = one_line(".".join(str(p) for p in err["loc"]))
        source = "option" if name in given else "SLURM_DEFRAG_SLURM_" + name.upper()
        raise InputError(
            f"{source} {name}: {one_line(err['msg'].removeprefix('Value error, '))}"
        ) from None
