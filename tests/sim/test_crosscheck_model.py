"""The Slurm model of ``bench/crosscheck_slurm.py``, offline: node choice, topology parsing
and the replay of saved real-Slurm runs (no cluster needed)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from simkit import node

from slurm_defrag.sim.cluster_state import ClusterState

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import crosscheck_slurm as xc  # noqa: E402

RUNS = ROOT / "docs" / "img" / "sim" / "crosscheck"


def test_leaf_switches_are_read_from_topology_text() -> None:
    text = (
        "SwitchName=l1 Nodes=n[01-02]\nSwitchName=l2 Nodes=n03,n04 # x\n"
        "SwitchName=top Switches=l1,l2 Nodes=n[01-04]\n"
    )
    assert xc.leaf_switches_from(text) == [["n01", "n02"], ["n03", "n04"]]


def test_leaf_best_fit_prefers_the_leaf_with_fewest_usable_nodes() -> None:
    state = ClusterState([node(f"n{i}", 4) for i in range(4)])
    fit = xc.LeafBestFit(state, [[0, 1], [2, 3]])
    assert fit.node(np.array([True, True, True, False])) == 2  # leaf 2 has one usable node
    assert fit.node(np.array([True, False, False, True])) == 0  # tie: the first leaf
    assert fit.node(np.array([False, True, True, True])) == 1


def test_leaf_best_fit_takes_only_the_lowest_weight_nodes() -> None:
    # The packing lever raised n0's and n2's Weight: leaf 1 keeps only n1, leaf 2 only n3.
    state = ClusterState([node(f"n{i}", 4) for i in range(4)])
    state.set_weight(0, 1001)
    state.set_weight(2, 1001)
    fit = xc.LeafBestFit(state, [[0, 1], [2, 3]])
    assert fit.node(np.array([True, True, True, True])) == 1
    assert fit.node(np.array([True, False, True, False])) == 0  # only raised nodes left


def test_weights_at_gives_the_last_record_seen_by_then() -> None:
    timeline = [(10.0, {"n0": 1}), (20.0, {"n0": 1001})]
    assert xc.weights_at(timeline, 5.0) is None
    assert xc.weights_at(timeline, 19.9) == {"n0": 1}
    assert xc.weights_at(timeline, 20.0) == {"n0": 1001}


@pytest.mark.parametrize(
    "run", sorted(RUNS.rglob("*-run.json")), ids=lambda p: str(p.relative_to(RUNS))
)
def test_saved_runs_replay_at_the_recorded_agreement(run: Path) -> None:
    # docs/benchmarks.md quotes these figures; a model change that moves them must
    # update the table (re-run ``--replay``).
    res = xc.recheck(run)
    saved = json.loads(run.with_name(run.name.replace("-run.json", ".json")).read_text())
    assert res.same_node_pct == pytest.approx(saved["same_node_pct"])
    assert res.decision_node_pct == pytest.approx(saved["decision_node_pct"])
    assert res.decision_node_pct >= 80.0
