"""Garbage-collector thresholds for a process that holds a whole cluster in memory.

A cycle on 1,000 nodes builds ~35,000 pydantic models (nodes, jobs, plan inputs) that all
survive the cycle. With CPython's default thresholds (700, 10, 10) every 700 new objects
start a young collection that walks the survivors again, and the old generation is swept
over and over while the snapshot is built: measured on bench/cycle_bench.py --nodes 1000,
the collector took ~1.1 s of a 2.4 s first cycle and half of every steady one. Almost all
of that garbage is freed by reference counting anyway (the models hold no cycles), so
collecting less often costs a few MB of RSS (measured: 261 vs 247 MB over 30 cycles), not
a leak: cyclic garbage is still collected, ~every 10 cycles instead of several times a
cycle.
"""

from __future__ import annotations

import gc
from typing import Final

THRESHOLDS: Final = (50_000, 20, 20)
"""gen0 allocations per young collection, young collections per gen1, gen1 per gen2."""


def tune_for_large_heap() -> None:
    """Set :data:`THRESHOLDS` for this process (the service, ``serve --once``, benches)."""
    gc.set_threshold(*THRESHOLDS)
