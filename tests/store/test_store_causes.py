"""The causes report's figures (store/causes.py) on the constructed history
(tests/impact_history.py), computed by hand, on SQLite and PostgreSQL.

Stranding in that history: 2 h..5 h only B (8 GPUs, NVLink) waits: n1 and n2 hold 4 free
GPUs each that no shape of the queue can use (spatial, 24 GPU-hours, held by F1 and F2:
4-GPU jobs of account fill); n3 (PCIe) holds 5 free GPUs B can never use (topology, 15
GPU-hours: F3's 2 GPUs get 10, A's 1 GPU 5). 12 h..13 h D waits: n3's 4 free GPUs (topology,
4 GPU-hours: F3 2, S 1, C 1). Before 2 h A's 1-GPU shape could use any free GPU: nothing
stranded.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

import impact_history as ih
from slurm_defrag.store.causes import load_causes
from slurm_defrag.store.database import Store
from slurm_defrag.store.database_errors import NotFound

NOW = ih.NOW.timestamp()


@pytest.fixture
def built(store: Store) -> Store:
    ih.build(store)
    return store


def test_stranded_gpu_hours_and_who_held_the_nodes(built: Store) -> None:
    c = load_causes(built, ih.SINCE_S, now=NOW)
    assert (c.since, c.until, c.hours) == (ih.T0, ih.NOW, 20.0)
    assert c.stranded_gpu_hours == pytest.approx(43.0)
    assert c.by_cause == pytest.approx({"spatial": 24.0, "topology": 19.0, "configuration": 0.0})
    assert [(r.name, round(r.gpu_hours, 6)) for r in c.headline] == [
        ("4-GPU jobs of account fill on 8-GPU h100 NVSwitch nodes", 24.0),
        ("2-GPU jobs of account fill on 8-GPU h100 PCIe nodes", 12.0),
        ("1-GPU jobs of account small on 8-GPU h100 PCIe nodes", 7.0),
    ]
    assert (
        c.reading
        == "4-GPU jobs of account fill on 8-GPU h100 NVSwitch nodes: 56 % of stranded GPU-hours"
    )
    assert [(u.name, round(u.gpu_hours, 6)) for u in c.users] == [("fred", 36.0), ("ann", 7.0)]
    dims = {d.key: d for d in c.dimensions}
    assert [(r.name, round(r.gpu_hours, 6)) for r in dims["topology"].rows] == [
        ("8-GPU h100 PCIe nodes", 19.0),
        ("8-GPU h100 NVSwitch nodes", 24.0),
    ][::-1]
    assert dims["topology"].reading == (
        "8-GPU h100 NVSwitch nodes: 56 % of stranded GPU-hours (spatial 100 %)"
    )
    assert dims["granularity"].reading == "4-GPU jobs: 56 % of stranded GPU-hours"
    assert dims["lifecycles"].rows[0].name == "time limit of 4 to 24 h"
    assert dims["policy"].reading.startswith("partition batch, QOS normal: 100 %; 56 % of the")
    assert c.worst[0].start == ih.h(2)
    assert c.worst[0].stranded_gpus == pytest.approx(13.0)  # 8 spatial + 5 topology
    assert c.worst[0].top == "4-GPU jobs of account fill on 8-GPU h100 NVSwitch nodes"
    assert c.swept_hours == 0


def test_hours_not_stored_yet_are_swept(built: Store) -> None:
    """Mid-hour the stored hours stop at the last whole one; the rest is computed at
    query time, and the figures are those of the same window stored."""
    now = (ih.h(12) + timedelta(minutes=40)).timestamp()
    c = load_causes(built, 13 * 3600, now=now)
    assert c.swept_hours == pytest.approx(40 / 60)
    assert c.stranded_gpu_hours == pytest.approx(24.0 + 15.0 + 4 * 40 / 60)


def test_empty_database_and_empty_window(store: Store) -> None:
    with pytest.raises(NotFound, match="no snapshots in the database yet"):
        load_causes(store, 7 * 86400, now=NOW)
    ih.build(store)
    with pytest.raises(NotFound, match=r"in this window .*widen --since"):
        load_causes(store, 3600, now=NOW + 10 * 86400)
