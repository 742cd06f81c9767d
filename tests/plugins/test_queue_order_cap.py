"""The queue-order boost job_submit.lua sets, capped to a share of the site's priority
range (issue #41 item 2), checked on the real script (lupa, Lua 5.1) for any weights and
any jobs:

* no boost is above the cap (and none is negative);
* the order the uncapped boost sets among jobs is kept (never reversed);
* cap 0 (priority/basic, no weights, ``--boost-cap 0``) changes no job;
* the script's arithmetic is :func:`slurm_defrag.packing.queue_order.capped`'s.
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from slurm_defrag.cli import app
from slurm_defrag.packing.node_levers import SHORT_FIRST_SPAN, short_first_entry
from slurm_defrag.packing.queue_order import NICE_LIMIT, WEIGHTS, capped, read_range

from .hook_cost import CountedHook
from .test_render import COMPOSE, compose_conf

OFFSET = 2**31
NO_VAL = 4294967294
TYPES = [
    {"gpus": 8, "nodes": 8, "models": {"g2": 8}, "cpus": 96, "mem": 393216},
    {"gpus": 8, "nodes": 1, "models": {"g3": 8}, "cpus": 128, "mem": 786432},
    {"gpus": 4, "nodes": 3, "models": {"l40s": 4}, "cpus": 64, "mem": 262144},
    {"gpus": 0, "nodes": 4, "models": {}},
]

_HOOK: CountedHook | None = None


def hook() -> CountedHook:
    global _HOOK
    if _HOOK is None:
        _HOOK = CountedHook(ported=False)
        _HOOK.forget_logs()  # "no table": it gets one below
    return _HOOK


def load(h: CountedHook, short_first: dict[str, object]) -> None:
    table = {
        "version": 1,
        "default_partition": "p",
        "enforce": False,
        "partitions": {"p": {"types": [dict(t) for t in TYPES]}},
        "short_first": short_first,
    }
    out = h.d.prepare_table(h.lua.table_from(table, recursive=True))
    prepared = out[0] if isinstance(out, tuple) else out
    assert prepared is not None, out
    h.d.nodes = prepared


def boost(h: CountedHook, job: dict[str, object]) -> int:
    """The priority the script adds to the job (minus the nice it sets; 0: none)."""
    desc = {"min_nodes": NO_VAL, "max_nodes": NO_VAL, "user_id": 1000, "partition": "p"}
    jd = h.table(desc | job)
    assert h.g.slurm_job_submit(jd, h.table({}), 1000) == 0
    assert not h.logs("error"), h.logs("error")
    nice = jd["nice"]
    return 0 if nice is None else OFFSET - int(nice)


jobs = st.fixed_dictionaries(
    {},
    optional={
        "tres_per_node": st.sampled_from(
            [
                "gres/gpu:1",
                "gres/gpu:2",
                "gres/gpu:4",
                "gres/gpu:8",
                "gres/gpu:g3:1",
                "gres/gpu:l40s:4",
                "gres/shard:2",
            ]
        ),
        "min_cpus": st.integers(1, 200),
        "pn_min_memory": st.integers(1, 900_000),
        "time_limit": st.integers(1, 3 * SHORT_FIRST_SPAN),
    },
)
weights = st.fixed_dictionaries(
    {f"PriorityWeight{w}": st.integers(0, 2**32 - 1) | st.integers(0, 20_000) for w in WEIGHTS}
)


@settings(max_examples=150, deadline=None)
@given(
    weights=weights,
    tres=st.sampled_from(["", "CPU=1000,Mem=2000", "GRES/gpu=5000.5"]),
    plugin=st.sampled_from(["priority/multifactor", "priority/basic", ""]),
    share=st.sampled_from([0.0, 0.01, 0.1, 0.5, 1.0]) | st.floats(0, 1),
    batch=st.lists(jobs, min_size=2, max_size=8),
)
def test_no_boost_passes_the_cap_and_the_order_is_kept(
    weights: dict[str, int], tres: str, plugin: str, share: float, batch: list[dict[str, Any]]
) -> None:
    prange = read_range({**weights, "PriorityWeightTRES": tres, "PriorityType": plugin}, "t")
    cap = prange.cap(share)
    assert 0 <= cap <= NICE_LIMIT
    entry = short_first_entry(0.2, all_jobs=True, large_gpus=4)
    h = hook()
    load(h, entry)
    raw = [boost(h, j) for j in batch]
    load(h, entry | {"cap": cap})
    got = [boost(h, j) for j in batch]
    for r, b in zip(raw, got, strict=True):
        assert 0 <= b <= cap
        assert b == capped(r, cap, SHORT_FIRST_SPAN)
    for (ra, ba), (rb, bb) in combinations(zip(raw, got, strict=True), 2):
        if ra < rb:
            assert ba <= bb
        elif ra > rb:
            assert ba >= bb
    if cap == 0:
        assert got == [0] * len(got)
    if prange.basic:
        assert cap == 0


def test_a_cap_as_large_as_the_raw_range_changes_nothing() -> None:
    h = hook()
    entry = short_first_entry(0.2, all_jobs=True, large_gpus=4)
    job = {"tres_per_node": "gres/gpu:g3:1", "time_limit": 90}
    load(h, entry)
    raw = boost(h, job)
    load(h, entry | {"cap": 3 * SHORT_FIRST_SPAN})
    assert boost(h, job) == raw == 2 * SHORT_FIRST_SPAN + SHORT_FIRST_SPAN - 90


@pytest.mark.parametrize(
    ("lines", "cap", "points"),
    [
        # the live site: fair-share 10,000 dominant; 10 % of 13,000
        (
            "PriorityType=priority/multifactor\nPriorityWeightFairshare=10000\n"
            "PriorityWeightAge=1000\nPriorityWeightJobSize=1000\nPriorityWeightPartition=1000\n",
            1300,
            13000,
        ),
        # weights in the millions: the boost grows with them
        ("PriorityType=priority/multifactor\nPriorityWeightFairshare=5000000\n", 500000, 5000000),
        ("PriorityType=priority/basic\nPriorityWeightFairshare=10000\n", 0, 0),
    ],
)
def test_render_reads_the_range_from_slurm_conf(
    tmp_path: Path, lines: str, cap: int, points: int
) -> None:
    conf = compose_conf(tmp_path)
    text = "\n".join(
        line for line in conf.read_text(encoding="utf-8").splitlines()
        if not line.startswith("Priority")
    )  # fmt: skip
    conf.write_text(text + "\n" + lines, encoding="utf-8")
    out = tmp_path / "defrag_nodes.lua"
    result = CliRunner().invoke(
        app,
        ["plugins", "render", "--slurm-conf", str(conf), "--gres-conf",
         str(COMPOSE / "gres.conf"), "--short-first", "0.25", "--no-pack", "-o", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    assert f"cap = {cap}," in text
    assert f"range = {points}," in text
    if points:
        assert f"boost at most {cap} priority points: 10 % of the range {points}" in result.output
    else:
        assert "priority/basic, which has no priority range" in result.output


def test_the_live_configuration_wins_over_slurm_conf(tmp_path: Path) -> None:
    """``--priority-config``: ``scontrol show config``'s text, e.g. piped in."""
    live = tmp_path / "config.txt"
    live.write_text(
        "Configuration data as of 2026-12-02T12:00:00\n"
        "PriorityType            = priority/multifactor\n"
        "PriorityWeightAge       = 1000\n"
        "PriorityWeightFairShare = 100000\n"
        "PriorityWeightTRES      = (null)\n",
        encoding="utf-8",
    )
    out = tmp_path / "defrag_nodes.lua"
    args = ["plugins", "render", "--slurm-conf", str(compose_conf(tmp_path)), "--no-pack"]
    result = CliRunner().invoke(
        app, [*args, "--short-first", "0.25", "--priority-config", str(live), "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    assert "cap = 10100," in text
    assert 'weights = "Age=1000,FairShare=100000",' in text
    assert str(live) in text.splitlines()[2]  # a source
    result = CliRunner().invoke(
        app, [*args, "--short-first", "0.25", "--priority-config", "-"], input=live.read_text()
    )
    assert result.exit_code == 0, result.output
    assert "cap = 10100," in result.stdout
    result = CliRunner().invoke(
        app, [*args, "--short-first", "0.25", "--priority-config", str(out)]
    )
    assert result.exit_code != 0
    assert "has no Priority* line" in str(result.exception or result.output)
