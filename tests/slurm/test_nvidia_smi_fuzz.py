"""Fuzz the ``nvidia-smi topo -m`` / ``nvlink --status`` parsers (issue #19, hostile input).

Starting from the recordings in tests/fixtures/nvidia-smi/, with hostile edits: only a
one-line :class:`~slurm_defrag.errors.DefragError` may escape, in bounded memory; and
whatever parses is a symmetric ``Links=`` matrix with -1 on the diagonal.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from slurm_inputs import mutated_text, random_text

from fuzzing import FUZZ, assert_clean
from slurm_defrag.slurm.discovery.nvidia_smi import (
    apply_link_status,
    parse_link_status,
    parse_topo_matrix,
)

pytestmark = pytest.mark.slow  # 10,000 cases per parser under CI (tests/fuzzing.py)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
TOPO = [p.read_text(encoding="utf-8") for p in sorted(FIXTURES.glob("*.topo.txt"))]
STATUS = [p.read_text(encoding="utf-8") for p in sorted(FIXTURES.glob("*.nvlink.txt"))]
DGX1 = parse_topo_matrix((FIXTURES / "dgx1-v100.topo.txt").read_text(encoding="utf-8"))


def _well_formed(links: list[list[int]]) -> None:
    n = len(links)
    for i in range(n):
        assert len(links[i]) == n
        assert links[i][i] == -1
        for j in range(n):
            assert links[i][j] == links[j][i]
            assert i == j or links[i][j] >= 0


@FUZZ
@given(st.sampled_from(TOPO).flatmap(mutated_text) | random_text)
def test_topo_matrix_fuzz(text: str) -> None:
    topo = assert_clean(parse_topo_matrix, text, "fuzz")
    if topo is not None:
        _well_formed(topo.links)


@FUZZ
@given(st.sampled_from(STATUS).flatmap(mutated_text) | random_text)
def test_link_status_fuzz(text: str) -> None:
    status = assert_clean(parse_link_status, text, "fuzz")
    if status is not None:
        out = assert_clean(apply_link_status, DGX1, status, "fuzz")
        if out is not None:
            _well_formed(out.links)
