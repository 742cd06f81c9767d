"""Failures become the three typed errors, and the CLI shows them as one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from slurm_defrag import cli
from slurm_defrag.errors import ExitCode
from slurm_defrag.slurm import backends
from slurm_defrag.slurm.cli_backend import CliSlurm
from slurm_defrag.slurm.connection import SlurmSettings
from slurm_defrag.slurm.failures import (
    SlurmParseError,
    SlurmRejectedError,
    SlurmUnavailableError,
)

CONTROLLER_DOWN = (
    "scontrol: error: Unable to contact slurm controller (connect failure)\n"
    "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"
)


def failing(returncode: int, stderr: str):  # type: ignore[no-untyped-def]
    def runner(argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(list(argv), returncode, "", stderr)

    return runner


def missing_binary(argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    raise FileNotFoundError(2, "No such file or directory", argv[0])


def too_slow(argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    raise subprocess.TimeoutExpired(list(argv), timeout_s)


@pytest.mark.parametrize(
    ("runner", "expected", "text"),
    [
        (failing(1, CONTROLLER_DOWN), SlurmUnavailableError, "Unable to contact slurm controller"),
        (missing_binary, SlurmUnavailableError, "scontrol is not on PATH"),
        (too_slow, SlurmUnavailableError, "no answer within 30 s"),
        # docker exec into a container without the Slurm client
        (
            failing(127, 'exec: "scontrol": executable file not found in $PATH'),
            SlurmUnavailableError,
            "could not run it",
        ),
        (
            failing(1, "Error response from daemon: No such container: ctld"),
            SlurmUnavailableError,
            "No such container",
        ),
        (
            failing(1, "scontrol: error: Invalid user for SlurmUser root, ignored"),
            SlurmRejectedError,
            "Invalid user",
        ),
    ],
    ids=["controller-down", "missing-binary", "timeout", "exit-127", "no-container", "refused"],
)
def test_cli_failures_are_typed(runner, expected, text) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(expected) as info:
        CliSlurm(SlurmSettings(), runner=runner).snapshot()
    assert text in str(info.value)
    assert "\n" not in str(info.value)


def run_main(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], backend: object, *args: str
) -> tuple[int, str, str]:
    monkeypatch.setattr(backends, "open_backend", lambda settings: backend)
    monkeypatch.setattr(sys, "argv", ["slurm-defrag", *args])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    out, err = capsys.readouterr()
    code = exit_info.value.code
    return code if isinstance(code, int) else 1, out, err


@pytest.mark.parametrize(
    "runner",
    [failing(1, CONTROLLER_DOWN), missing_binary],
    ids=["controller-down", "missing-binary"],
)
@pytest.mark.parametrize("command", [["snapshot"], ["frag"]])
def test_cli_prints_one_unavailable_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    runner: Any,
    command: list[str],
) -> None:
    code, out, err = run_main(
        monkeypatch, capsys, CliSlurm(SlurmSettings(), runner=runner), *command
    )
    assert code == SlurmUnavailableError.exit_code
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("slurm-defrag: error: Slurm unavailable: scontrol --version")
    assert "Traceback" not in err + out


def test_missing_slurm_binary_end_to_end(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A real process: the configured command prefix does not exist on this machine."""
    env = {**os.environ, "SLURM_DEFRAG_SLURM_COMMAND_PREFIX": json.dumps([str(tmp_path / "nope")])}
    proc = subprocess.run(
        [sys.executable, "-c", "from slurm_defrag.cli import main; main()", "snapshot"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == SlurmUnavailableError.exit_code
    assert proc.stderr.count("\n") == 1
    assert "Slurm unavailable" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_setting_is_one_input_error_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLURM_DEFRAG_SLURM_TOPOLOGY_TEMPLATES", '{"gpu[1-2]": "nvlink-9"}')
    monkeypatch.setattr(sys, "argv", ["slurm-defrag", "snapshot"])
    with pytest.raises(SystemExit) as info:
        cli.main()
    err = capsys.readouterr().err
    assert info.value.code == ExitCode.BAD_INPUT
    assert "SLURM_DEFRAG_SLURM_TOPOLOGY_TEMPLATES" in err
    assert "nvlink-9" in err


# -- rest ------------------------------------------------------------------------------


def rest_with(handler) -> object:  # type: ignore[no-untyped-def]
    from slurm_defrag.slurm.rest import RestSlurm

    client = httpx.Client(base_url="http://x", transport=httpx.MockTransport(handler))
    return RestSlurm(SlurmSettings(backend="rest"), client=client)


def test_rest_connection_refused_is_unavailable() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    with pytest.raises(SlurmUnavailableError, match="Connection refused"):
        rest_with(handler).snapshot()  # type: ignore[attr-defined]


def test_rest_controller_down_is_unavailable() -> None:
    body = {
        "errors": [
            {"error": "Unable to contact slurm controller (connect failure)", "error_number": 1007}
        ]
    }

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, json=body)

    with pytest.raises(SlurmUnavailableError, match="Unable to contact slurm controller"):
        rest_with(handler).snapshot()  # type: ignore[attr-defined]


def test_rest_bad_token_is_rejected() -> None:
    with pytest.raises(SlurmRejectedError, match="HTTP 401"):
        rest_with(lambda r: httpx.Response(401, text="Authentication failure")).snapshot()  # type: ignore[attr-defined]


def test_rest_discovers_newest_served_version(recordings: SimpleNamespace) -> None:
    seen: list[str] = []
    transport = recordings.rest_transport("24.11")

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        response: httpx.Response = transport.handle_request(request)
        return response

    backend = recordings.rest("24.11", httpx.MockTransport(handler))
    assert backend.api_version() == "v0.0.42"
    assert seen == [f"/slurm/v0.0.4{i}/ping" for i in (5, 4, 3, 2)]


def test_rest_sends_jwt_headers(recordings: SimpleNamespace, tmp_path) -> None:  # type: ignore[no-untyped-def]
    token_file = tmp_path / "jwt"
    token_file.write_text("SLURM_JWT=abc.def\n")
    headers: list[httpx.Headers] = []
    transport = recordings.rest_transport("22.05")

    def handler(request: httpx.Request) -> httpx.Response:
        headers.append(request.headers)
        response: httpx.Response = transport.handle_request(request)
        return response

    backend = recordings.rest(
        "22.05", httpx.MockTransport(handler), rest_token_file=token_file, rest_user="alice"
    )
    assert backend.snapshot().source == "rest"
    assert all(h["X-SLURM-USER-TOKEN"] == "abc.def" for h in headers)
    assert all(h["X-SLURM-USER-NAME"] == "alice" for h in headers)


def test_rest_no_version_served_is_rejected() -> None:
    with pytest.raises(SlurmRejectedError, match="serves none of"):
        rest_with(lambda r: httpx.Response(404)).snapshot()  # type: ignore[attr-defined]


def test_json_errors_field_is_surfaced(recordings: SimpleNamespace) -> None:
    doc = json.loads(recordings.text("22.05", "squeue_--json.json"))
    doc["errors"] = [{"error": "Invalid job id specified", "error_number": 2017}]
    runner = recordings.ReplayRunner("22.05", {"squeue --json": json.dumps(doc)})
    with pytest.raises(SlurmRejectedError, match="Invalid job id specified"):
        recordings.cli("22.05", runner).snapshot()


def test_version_output_without_version_is_parse_error(recordings: SimpleNamespace) -> None:
    runner = recordings.ReplayRunner("22.05", {"scontrol --version": "slurm unknown\n"})
    with pytest.raises(SlurmParseError, match="scontrol --version"):
        recordings.cli("22.05", runner).snapshot()


# -- slurmctld down, seen from a client host or slurmrestd (live findings, 22.05/24.11) ---


def test_cli_inband_error_with_controller_cause_on_stderr_is_unavailable() -> None:
    """22.05 ``squeue --json`` on a login node with slurmctld down: exit 0, JSON says only
    "Failed while looking for jobs"; the cause is on stderr (ten repeated lines)."""
    out = json.dumps(
        {
            "errors": [{"description": "Failed while looking for jobs", "error_number": -1}],
            "jobs": [],
        }
    )
    err = 'squeue: error: Unable to resolve "slurmctld"\n' * 10 + (
        "squeue: error: Unable to establish control machine address\n"
    )

    def runner(argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(list(argv), 0, out, err)

    backend = CliSlurm(SlurmSettings(backend="cli"), runner=runner)
    with pytest.raises(SlurmUnavailableError) as info:
        backend.run_json("squeue", "--json")
    message = str(info.value)
    assert "Unable to establish control machine address" in message
    assert message.count("Unable to resolve") == 0  # only the last stderr line is shown


@pytest.mark.parametrize(
    ("status", "body"),
    [
        # 24.11: 502, the cause in "error", a generic "description"
        (
            502,
            {
                "errors": [
                    {
                        "description": "Unable to query jobs",
                        "error": "Unable to contact slurm controller (connect failure)",
                    }
                ]
            },
        ),
        # 22.05: 500 from the ping while slurmctld is down
        (500, {"errors": [{"error": "slurmctld config is unable to load"}]}),
        (503, None),
    ],
)
def test_rest_slurmctld_down_is_unavailable(status: int, body: Any) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=body) if body else httpx.Response(status)

    with pytest.raises(SlurmUnavailableError):
        rest_with(handler).snapshot()  # type: ignore[attr-defined]
