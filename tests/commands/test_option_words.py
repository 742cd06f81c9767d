"""Odd option values and files are one error line, never a traceback (review findings)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_run import assert_one_line_error


@pytest.mark.parametrize("command", ["doctor", "snapshot"])
def test_an_unbalanced_quote_in_the_command_prefix(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert_one_line_error(
        capsys,
        *(command, "--command-prefix", "docker exec 'x"),
        words=("--command-prefix", "No closing quotation"),
    )


@pytest.mark.parametrize(
    "text", ["[" * 100_000, '{"gpus": ' + "9" * 5000 + "}"], ids=["deep", "long-number"]
)
def test_topology_show_on_a_hostile_file(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "node01.json"
    path.write_text(text, encoding="utf-8")
    assert_one_line_error(capsys, "topology", "show", str(path), words=("node01.json", "JSON"))
