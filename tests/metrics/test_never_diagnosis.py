"""An unsatisfiable job's few example nodes are the ones a row per node would give.

``_never_diagnosis`` builds rows only for the nodes that can be picked (issue #42); the
oracle here is the version that built a row for every node (87c2797), compared on random
clusters with drained and down nodes, two partitions and requests no node can host.
"""

from __future__ import annotations

import pytest

from slurm_defrag.domain.topology import popcount
from slurm_defrag.metrics.classes import NodeKind, group_nodes
from slurm_defrag.metrics.demand import DemandItem
from slurm_defrag.metrics.fit import Verdict, explain
from slurm_defrag.metrics.report import NodeDiagnosis
from slurm_defrag.metrics.starvation import (
    UNSATISFIABLE_EXAMPLES,
    _never_diagnosis,
    _never_verdict,
)
from slurm_defrag.synth import random_cluster


def _every_row(kinds: list[NodeKind], item: DemandItem) -> tuple[tuple[NodeDiagnosis, ...], int]:
    rows = []
    for kind in kinds:
        for cls in kind.classes:
            free = cls.free_mask if kind.available else 0
            v = _never_verdict(kind, free, item)
            largest, n_free = kind.topo.largest_free_block(free), popcount(cls.free_mask)
            for n in cls.members:
                text = explain(n, kind.topo, free, item, v)
                d = NodeDiagnosis(
                    node=n.name, verdict=v, free=n_free, largest_free_block=largest, detail=text
                )
                rows.append((v is Verdict.NOT_IN_PARTITION, f"{v}: {text}", n.name, d))
    rows.sort(key=lambda r: (r[0], r[2]))
    picked = []
    reasons: set[str] = set()
    for r in rows:
        if r[1] not in reasons and len(picked) < UNSATISFIABLE_EXAMPLES:
            reasons.add(r[1])
            picked.append(r)
    taken = {r[2] for r in picked}
    picked += [r for r in rows if r[2] not in taken][: UNSATISFIABLE_EXAMPLES - len(picked)]
    picked.sort(key=lambda r: (r[0], r[2]))
    return tuple(r[3] for r in picked), len(rows) - len(picked)


ITEMS = [
    DemandItem(gpus_per_node=16, partition="high"),
    DemandItem(gpus_per_node=8, nvlink=True, gpu_model="V100", partition="batch"),
    DemandItem(gpus_per_node=4, nvlink=True, gpu_model="nope"),
    DemandItem(gpus_per_node=8, whole_node=True, partition="high"),
    DemandItem(gpus_per_node=2, partition="other"),
    DemandItem(gpus_per_node=1),
]


@pytest.mark.parametrize("seed", range(12))
def test_the_examples_and_the_count_are_those_of_a_row_per_node(seed: int) -> None:
    snap = random_cluster(40 + 40 * seed, seed=seed, fill=0.5 + seed / 30, pending=0)
    kinds = group_nodes(snap)
    for item in ITEMS:
        got, more = _never_diagnosis(kinds, item)
        want, want_more = _every_row(kinds, item)
        assert more == want_more
        assert [d.model_dump() for d in got] == [d.model_dump() for d in want]
