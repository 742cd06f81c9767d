"""A file the user names is reported one way, whatever is wrong with it (issue #45).

A missing file was the documented one line (exit 3) but an unreadable one (permissions)
was typer's usage box (exit 2): typer checked readability before the command could say
anything. Missing, unreadable, a directory, bad bytes: one ``slurm-defrag: error:`` line
naming the file, exit 3. ``-`` is standard input for ``--snapshot``.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from cli_run import run_main
from infra import EXAMPLES
from slurm_defrag.errors import ExitCode

COURSE = str(EXAMPLES / "course.json")

# Each command line with the file (FILE) in the place the user names one.
COMMANDS = [
    ("frag", "--snapshot", "FILE"),
    ("plan", "--snapshot", "FILE"),
    ("plan", "--snapshot", COURSE, "--policy", "FILE"),
    ("frag", "--snapshot", COURSE, "--mix", "FILE"),
    ("web", "--port", "0", "--snapshot", "FILE"),
    ("top", "--once", "--snapshot", "FILE"),
    ("topology", "show", "FILE"),
    ("serve", "--once", "--config", "FILE"),
    ("doctor", "--config", "FILE"),
]


def _unreadable(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``path`` as a user other than root sees a file mode 000 (root reads anything, so
    the tests run as root cannot chmod their way there): access() says no, open() fails."""
    path.write_text("{}\n", encoding="utf-8")
    if os.geteuid() != 0:
        path.chmod(0)
        return
    real_access, real_open = os.access, Path.open

    def access(p: object, mode: int, *args: object, **kwargs: object) -> bool:
        return False if os.fspath(p) == str(path) else real_access(p, mode, *args, **kwargs)  # type: ignore[arg-type]

    def open_(self: Path, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        if str(self) == str(path):
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)
    monkeypatch.setattr(Path, "open", open_)


@pytest.fixture(params=["missing", "unreadable", "directory", "bad-bytes"])
def bad_file(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    path = tmp_path / "input.json"
    if request.param == "unreadable":
        _unreadable(path, monkeypatch)
    elif request.param == "directory":
        path.mkdir()
    elif request.param == "bad-bytes":
        path.write_bytes(b'{"nodes": "\xff\xfe"}\n')
    return path


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[: c.index("FILE")]))
def test_a_bad_file_is_one_line_exit_3(
    command: tuple[str, ...], bad_file: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.delenv("SLURM_DEFRAG_CONFIG", raising=False)
    args = [str(bad_file) if a == "FILE" else a for a in command]
    capsys.readouterr()
    code = run_main(*args)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("slurm-defrag: error: "), err
    assert str(bad_file) in lines[0], err
    assert code == ExitCode.BAD_INPUT, err


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


@pytest.mark.parametrize("command", ["frag", "plan"])
def test_snapshot_dash_reads_stdin(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``slurm-defrag snapshot --json | slurm-defrag frag --snapshot -`` (was: ``-: no
    such file``)."""
    _stdin(monkeypatch, Path(COURSE).read_bytes())
    capsys.readouterr()
    code = run_main(command, "--snapshot", "-", "--json")
    out, err = capsys.readouterr()
    assert code == 0, err
    assert '"cluster": "course"' in out


@pytest.mark.parametrize(
    ("data", "words"),
    [(b"", ("<stdin>", "not valid JSON")), (b"\xff", ("<stdin>", "not UTF-8")),
     (b'{"schema_version": 1}', ("<stdin>",))],
    ids=["empty", "bad-bytes", "not-a-snapshot"],
)  # fmt: skip
def test_bad_stdin_is_one_line(
    data: bytes,
    words: tuple[str, ...],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _stdin(monkeypatch, data)
    capsys.readouterr()
    code = run_main("frag", "--snapshot", "-")
    err = capsys.readouterr().err
    assert code == ExitCode.BAD_INPUT, err
    assert len(err.strip().splitlines()) == 1, err
    for word in words:
        assert word in err, err


def test_no_path_option_is_checked_by_typer() -> None:
    """Every path option and argument of every command leaves the checks to the command
    (``readable=False``): typer's would be a usage box and exit 2 (typer internals: a
    typer upgrade that renames them fails here, not silently)."""
    from slurm_defrag.cli import COMMANDS, load

    def checked(command: object, name: str) -> list[str]:
        found = []
        for p in getattr(command, "params", []):
            desc = p.type_descriptor
            if desc.is_path and desc.parameter_info.readable:
                found.append(f"{name} {'/'.join(p.opts) or p.name}")
        for sub_name, sub in getattr(command, "commands", {}).items():
            found += checked(sub, f"{name} {sub_name}")
        return found

    assert [c for n in COMMANDS for c in checked(load(n), n)] == []
