"""Start-up cost: a command loads only the libraries it needs.

``slurm-defrag history`` is run in scripts and by the web page, with a 2 s goal end to end
(docs/benchmarks.md, "Persistence"); about half of that used to be imports of libraries
other commands need (the solver, plotting). Command modules import those inside the
command function, and this test keeps it so: each case runs the CLI in a fresh
interpreter and lists which heavy modules ended up in ``sys.modules``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from slurm_defrag.store import migrate
from slurm_defrag.store.engine import make_engine

# Runs the CLI like the console script does, then reports the heavy modules it loaded.
PROBE = """
import json, sys
from slurm_defrag.cli import main
sys.argv = ["slurm-defrag", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
# Not pydantic: typer itself loads it to convert the options of any command it runs.
heavy = ("ortools", "matplotlib", "numpy", "sqlalchemy")
print(json.dumps(sorted(m for m in heavy if m in sys.modules)), file=sys.stderr)
"""


def loaded(*args: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    return set(json.loads(out.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("args", [("--help",), ("history", "--help"), ("version",)])
def test_help_loads_no_heavy_library(args: tuple[str, ...]) -> None:
    assert loaded(*args) == set()


def test_history_loads_the_database_layer_only(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    assert loaded("history", "--since", "1d", "--db", url, "--json") == {"sqlalchemy"}


def test_report_help_loads_no_heavy_library() -> None:
    assert loaded("report", "impact", "--help") == set()
    assert loaded("report", "causes", "--help") == set()


def test_reports_load_the_database_layer_only(tmp_path: Path) -> None:
    """No numpy (the bootstrap is pure Python), no matplotlib without --plot."""
    url = f"sqlite:///{tmp_path / 'r.db'}"
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    assert loaded("report", "causes", "--db", url, "--json") == {"sqlalchemy"}
    assert loaded("report", "impact", "--db", url, "--json") == {"sqlalchemy"}
