"""Every setting docs/quickstart.md names is read under exactly the spelling it gives.

The table's rows are parsed from the page, so a row added, renamed or removed there fails
here until this test knows a value to try and where the setting lands.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from slurm_defrag.service.settings import load as load_service
from slurm_defrag.slurm.connection import load_settings as load_slurm
from slurm_defrag.store.engine import ENV_URL

PAGE = Path(__file__).resolve().parents[2] / "docs" / "quickstart.md"

# environment name -> (value, TOML key or None, getter on the loaded settings, expected)
CASES: dict[str, tuple[str, str | None, Any, object]] = {
    "SLURM_DEFRAG_SLURM_BACKEND": ("rest", "[slurm] backend", lambda s: s.backend, "rest"),
    "SLURM_DEFRAG_SLURM_COMMAND_PREFIX": (
        '["sudo", "-n"]',
        "[slurm] command_prefix",
        lambda s: s.command_prefix,
        ["sudo", "-n"],
    ),
    "SLURM_DEFRAG_SLURM_COMMAND_TIMEOUT_S": (
        "7",
        "[slurm] command_timeout_s",
        lambda s: s.command_timeout_s,
        7.0,
    ),
    "SLURM_DEFRAG_SLURM_GRES_CONF": (
        "/etc/slurm/gres.conf",
        "[slurm] gres_conf",
        lambda s: str(s.gres_conf),
        "/etc/slurm/gres.conf",
    ),
    "SLURM_DEFRAG_SLURM_TOPOLOGY_MAP": (
        "/etc/slurm-defrag/topology.yaml",
        "[slurm] topology_map",
        lambda s: str(s.topology_map),
        "/etc/slurm-defrag/topology.yaml",
    ),
    "SLURM_DEFRAG_SLURM_TOPOLOGY_DIR": (
        "/var/lib/slurm-defrag/topology",
        "[slurm] topology_dir",
        lambda s: str(s.topology_dir),
        "/var/lib/slurm-defrag/topology",
    ),
    "SLURM_DEFRAG_SLURM_TOPOLOGY_TEMPLATES": (
        '{"gpu[01-02]": "nvswitch-8"}',
        "[slurm] topology_templates",
        lambda s: s.topology_templates,
        {"gpu[01-02]": "nvswitch-8"},
    ),
    "SLURM_DEFRAG_SLURM_REST_URL": (
        "http://ctl:6820",
        "[slurm] rest_url",
        lambda s: s.rest_url,
        "http://ctl:6820",
    ),
    "SLURM_DEFRAG_SLURM_REST_TOKEN_FILE": (
        "/etc/slurm-defrag/jwt",
        "[slurm] rest_token_file",
        lambda s: str(s.rest_token_file),
        "/etc/slurm-defrag/jwt",
    ),
    "SLURM_DEFRAG_DB_URL": ("sqlite:////tmp/q.db", "db_url", None, "sqlite:////tmp/q.db"),
    "SLURM_DEFRAG_MODE": ("enforce", "mode", lambda s: s.mode, "enforce"),
    "SLURM_DEFRAG_INTERVAL_S": ("90", "interval_s", lambda s: s.interval_s, 90.0),
    "SLURM_DEFRAG_POLICY": (
        "/etc/slurm-defrag/policy.toml",
        "policy",
        lambda s: str(s.policy),
        "/etc/slurm-defrag/policy.toml",
    ),
    "SLURM_DEFRAG_KILL_SWITCH_FILE": (
        "/run/defrag-stop",
        "kill_switch_file",
        lambda s: str(s.kill_switch_file),
        "/run/defrag-stop",
    ),
    "SLURM_DEFRAG_CONFIG": ("", None, None, None),
}


def _rows() -> list[tuple[str, str | None]]:
    """(environment name, TOML key or None) for each row of the page's settings table."""
    text = PAGE.read_text(encoding="utf-8")
    table = text[text.index("## Settings that are read") :]
    rows = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1].startswith("`SLURM_DEFRAG_"):
            env = cells[1].strip("`")
            toml = None if cells[2] == "—" else cells[2].replace("`", "")
            rows.append((env, toml))
    return rows


def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("SLURM_DEFRAG_"):
            monkeypatch.delenv(name)


def test_the_table_is_the_one_this_test_knows() -> None:
    rows = _rows()
    assert [env for env, _ in rows] == list(CASES), "docs/quickstart.md's settings table changed"
    for env, toml in rows:
        assert toml == CASES[env][1], f"{env}: TOML key on the page is {toml!r}"


@pytest.mark.parametrize("env", [e for e in CASES if CASES[e][2]])
def test_each_setting_is_read_from_the_environment_and_the_file(
    env: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    value, toml, get, expected = CASES[env]
    assert toml is not None
    nested = env.startswith("SLURM_DEFRAG_SLURM_")

    def service(config: Path | None = None) -> Any:
        settings = load_service(config)
        return settings.slurm if nested else settings

    _clean(monkeypatch)
    monkeypatch.setenv(env, value)
    if nested:
        assert get(load_slurm()) == expected  # what snapshot/frag/plan read
    assert get(service()) == expected  # what serve reads
    monkeypatch.delenv(env)
    key = toml.removeprefix("[slurm] ")
    config = tmp_path / "service.toml"
    table = "[slurm]\n" if nested else ""
    config.write_text(f"{table}{key} = {_toml_value(value)}\n", encoding="utf-8")
    assert get(service(config)) == expected


def test_database_url_is_read_by_the_commands_and_the_service(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from slurm_defrag.store.engine import resolve_url

    _clean(monkeypatch)
    monkeypatch.setenv(ENV_URL, "sqlite:////tmp/q.db")
    assert ENV_URL == "SLURM_DEFRAG_DB_URL"
    assert resolve_url(None) == "sqlite:////tmp/q.db"
    monkeypatch.delenv(ENV_URL)
    config = tmp_path / "service.toml"
    config.write_text('db_url = "sqlite:////tmp/q.db"\n', encoding="utf-8")
    assert load_service(config).db_url == "sqlite:////tmp/q.db"


def test_config_file_is_found_through_its_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _clean(monkeypatch)
    config = tmp_path / "service.toml"
    config.write_text('mode = "off"\n', encoding="utf-8")
    monkeypatch.setenv("SLURM_DEFRAG_CONFIG", str(config))
    assert load_service().mode == "off"


def _toml_value(value: str) -> str:
    if value.startswith(("[", "{")):
        import json

        parsed = json.loads(value)
        if isinstance(parsed, dict):
            return "{ " + ", ".join(f'"{k}" = "{v}"' for k, v in parsed.items()) + " }"
        return "[" + ", ".join(f'"{v}"' for v in parsed) + "]"
    if re.fullmatch(r"[0-9.]+", value):
        return value
    return f'"{value}"'
