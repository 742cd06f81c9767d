"""Run ``slurm-defrag`` in process through its real entry point (import as
``from cli_run import ...``).

:func:`slurm_defrag.cli.main` is what the console script calls: it prints a
:class:`~slurm_defrag.errors.DefragError` as one line and exits non-zero, and lets any other
exception through (a traceback: the bug). Calling it in process keeps these tests fast;
``pytest``'s ``capsys`` captures what it prints.
"""

from __future__ import annotations

import sys

import pytest

from slurm_defrag.cli import main


def run_main(*args: str) -> int:
    """Exit status of ``slurm-defrag ARGS``; an unexpected exception propagates."""
    saved = sys.argv
    sys.argv = ["slurm-defrag", *args]
    try:
        main()
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.argv = saved
    return 0


def assert_one_line_error(
    capsys: pytest.CaptureFixture[str], *args: str, words: tuple[str, ...] = ()
) -> str:
    """``slurm-defrag ARGS`` fails with exactly one ``error:`` line on stderr containing
    ``words``, no traceback; returns that line."""
    capsys.readouterr()
    code = run_main(*args)
    err = capsys.readouterr().err
    assert code != 0, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("slurm-defrag: error: "), err
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]
