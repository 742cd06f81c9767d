"""The tests mirror the code (docs/testing.md): one folder per package, no catch-all.

``tests/<package>/`` for every package of ``src/slurm_defrag/``; beside them only the
folders named in :data:`OTHERS`. Test file names are unique across folders: pytest imports
them by base name (rootdir-relative "prepend" mode), so two ``test_x.py`` would clash.
"""

from __future__ import annotations

from collections import Counter

from infra import ROOT

PACKAGE = ROOT / "src" / "slurm_defrag"
TESTS = ROOT / "tests"
OTHERS = {
    "e2e": "live tests against the compose Slurm clusters (marker slurm)",
    "plugins": "the Slurm-side hooks of slurm-plugins/ run offline (Lua, busted, the epilog)",
    "project": "the repository as a whole: layers, packaging, this layout",
    "fixtures": "recorded Slurm outputs and other inputs, no tests",
}


def packages() -> set[str]:
    return {p.parent.name for p in PACKAGE.glob("*/__init__.py")}


def test_every_package_has_its_tests_in_the_matching_folder() -> None:
    missing = sorted(name for name in packages() if not any((TESTS / name).glob("test_*.py")))
    assert not missing, f"packages without tests/<package>/test_*.py: {missing}"


def test_no_test_folder_outside_the_packages_and_the_named_others() -> None:
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    stray = sorted(folders - packages() - set(OTHERS))
    assert not stray, f"test folders that mirror no package: {stray} (see docs/testing.md)"


def test_test_file_names_are_unique() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert not [n for n, c in names.items() if c > 1]
