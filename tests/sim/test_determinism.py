from __future__ import annotations

from slurm_defrag.sim.protocol_a import run_a
from slurm_defrag.sim.protocol_b import SettingsB, run_b


def test_protocol_a_same_seed_same_result(small_nodes, small_trace) -> None:  # type: ignore[no-untyped-def]
    for policy in ("random", "fgd", "packing"):
        a = run_a(small_nodes, small_trace, policy, seed=7)
        b = run_a(small_nodes, small_trace, policy, seed=7)
        assert a.unallocated_pct == b.unallocated_pct
        assert (a.jobs, a.failed) == (b.jobs, b.failed)
    assert a.final_unallocated_pct < 100


def test_protocol_b_same_seed_same_result(small_nodes, small_trace) -> None:  # type: ignore[no-untyped-def]
    s = SettingsB(load=1.2, horizon=3600.0, warmup=600.0, max_runtime=600.0)
    a = run_b(small_nodes, small_trace, "fgd", seed=3, settings=s)
    b = run_b(small_nodes, small_trace, "fgd", seed=3, settings=s)
    strip = lambda r: {k: v for k, v in r.__dict__.items() if k != "wall_s"}  # noqa: E731
    assert strip(a) == strip(b)
    assert a.jobs > 0
    assert a.unfinished == 0
