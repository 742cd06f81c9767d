"""A missing optional package names an install command that works where the user is
(issue #45): ``pip install 'slurm-defrag[plot]'`` fetches another copy when run from a
source checkout, whose form is ``pip install -e '.[plot]'``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from cli_run import assert_one_line_error
from slurm_defrag import extras

WHEEL_HINT = "pip install 'slurm-defrag[plot]'"  # scripts/test.sh greps the bare wheel for it


def test_history_plot_without_matplotlib_names_both_forms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: object, **kwargs: object) -> object:
        return None if name == "matplotlib" else real(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    # The full run tests the installed wheel, the fast one the tree: place the module in a
    # checkout so the line is the same under both.
    root = tmp_path / "checkout"
    (root / "src" / "slurm_defrag").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'slurm-defrag'\n")
    monkeypatch.setattr(extras, "__file__", str(root / "src" / "slurm_defrag" / "extras.py"))
    line = assert_one_line_error(
        capsys, "history", "--db", f"sqlite:///{tmp_path / 'h.db'}", "--plot",
        str(tmp_path / "h.png"), words=(WHEEL_HINT, "pip install -e"),
    )  # fmt: skip
    assert f"pip install -e '{root.resolve()}[plot]'" in line


def test_an_installed_wheel_names_the_index_form_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        extras, "__file__", "/opt/venv/lib/python3.11/site-packages/slurm_defrag/extras.py"
    )
    assert extras.checkout() is None
    hint = extras.install_hint("plot")
    assert hint.startswith(WHEEL_HINT)
    assert "pip install -e '.[plot]'" in hint
