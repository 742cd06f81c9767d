"""Live: the queue-order boost stays within its cap in sprio, and fair-share outranks it
(issue #41 item 2).

Found live before the cap (22.05, Fair Tree, PriorityWeightFairshare=10000): against a
7-day job, or for any job of 4+ GPUs against a smaller one, the boost (a difference of
10,080 points or more) won whatever fair-share said. On the compose cluster, holding
``exclusive_cluster()``:

1. the priority cross-check's site (:func:`test_priority_crosscheck_live.
   priority_config_after_usage`: every usage reset, then alice heavy, bob less, carol
   none, ranked so by slurmctld before the test goes on; fair-share 10,000, age 1,000,
   job size 1,000, partition 1,000, QOS 2,000: a range of 15,000);
2. the hooks installed, then the table rendered as a site would against the live cluster:
   ``plugins render --short-first 0.25 --large-first 4 --short-first-all`` with
   ``--priority-config`` the live ``scontrol show config`` (cap: 10 % of 15,000 = 1,500);
3. node01 blocked by a job of ours; alice's and carol's 8-GPU jobs (tier 1, large) with
   limits of 10 minutes to 7 days submitted to node01, where they wait;
4. ``sprio``: every job's NICE is minus the capped boost (``floor(raw x 1500 / 30240)``),
   never beyond the cap; each priority is the sum of its factors less the nice; and
   carol's 7-day job (no usage) outranks alice's 10-minute one (the heaviest user), which
   the raw boost (10,070 points between them) would have reversed.

slurm.conf is restored and slurmctld restarted whatever happens (the cross-check's and the
hook installer's own guards). About three minutes (three to four slurmctld restarts)::

    SLURM_SUITE=bookworm .venv/bin/pytest -m slurm tests/e2e/test_boost_cap_live.py -v -s

Written for 22.05 and 24.11 (the compose suites).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from hook_install import hooks_installed
from live_cluster import ctld, exclusive_cluster, has_accounting
from test_priority_crosscheck_live import (
    CFG,
    NODE,
    priority_config_after_usage,
    sprio,
    submit,
    wait_state,
)

from plugins.plugins_support import ETC, Cluster, reload_script, require
from slurm_defrag.packing.node_levers import SHORT_FIRST_SPAN
from slurm_defrag.packing.queue_order import BOOST_SPANS, capped

pytestmark = pytest.mark.slurm

SHARE = 0.1
LIMITS_MIN = {"10": 10, "2-0": 2 * 1440, "7-0": 7 * 1440}
"""``-t`` values and the limit in minutes the script reads."""


def raw_boost(limit_min: int) -> int:
    """An 8-GPU job's uncapped boost: tier 1 (``--large-first 4``) plus the limit's part."""
    return SHORT_FIRST_SPAN + max(0, SHORT_FIRST_SPAN - limit_min)


def render_live(cluster: Cluster, tmp: Path) -> str:
    """The table ``plugins render`` writes from the live slurm.conf and ``scontrol show
    config``, installed and reloaded; returns render's summary line."""
    conf, gres, live = tmp / "slurm.conf", tmp / "gres.conf", tmp / "show_config.txt"
    cluster.cp_out(f"{ETC}/slurm.conf", conf)
    cluster.cp_out(f"{ETC}/gres.conf", gres)
    live.write_text(ctld("scontrol", "show", "config"), encoding="utf-8")
    out = tmp / "defrag_nodes.lua"
    args = [
        "plugins", "render", "--slurm-conf", str(conf), "--gres-conf", str(gres),
        "--short-first", "0.25", "--large-first", "4", "--short-first-all",
        "--boost-cap", str(SHARE), "--priority-config", str(live), "--no-touch", "-o", str(out),
    ]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "slurm_defrag", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    cluster.cp_in(out, f"{ETC}/defrag_nodes.lua")
    reload_script(cluster)
    return proc.stderr


def test_the_boost_stays_within_its_cap_and_fair_share_wins(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    require(has_accounting(), "the compose Slurm cluster with slurmdbd")
    cluster = Cluster()
    with (
        exclusive_cluster(),
        priority_config_after_usage(cluster, tmp_path),
        hooks_installed(tmp_path_factory) as installed,
    ):
        c = installed.cluster
        points = CFG.weight_sum
        cap = int(SHARE * points)
        summary = render_live(c, tmp_path)
        assert f"boost at most {cap} priority points: 10 % of the range {points}" in summary
        blocker = submit(
            "root", "-p", "high", "-w", NODE, "--gres=gpu:8", "-c", "1", "-t", "10",
            wrap="sleep 600",
        )  # fmt: skip
        wait_state(blocker, "RUNNING")
        jobs: dict[tuple[str, str], str] = {}
        for user in ("alice", "carol"):
            for limit in LIMITS_MIN:
                jobs[user, limit] = submit(
                    user, "-p", "batch", "-w", NODE, "--gres=gpu:8", "-c", "1", "-t", limit
                )
        ids = list(jobs.values())
        seen: dict[str, dict[str, str]] = {}
        for _ in range(30):  # each job shows in sprio once slurmctld has priced it
            seen = sprio(ids)
            if len(seen) == len(ids):
                break
            time.sleep(1)
        assert len(seen) == len(ids), (ids, seen)
        print("\n".join(f"{k}: {seen[j]}" for k, j in jobs.items()))

        for (user, limit), job in jobs.items():
            row = seen[job]
            nice = int(row["nice"])
            want = capped(raw_boost(LIMITS_MIN[limit]), cap, SHORT_FIRST_SPAN)
            assert -nice == want, (user, limit, row)
            assert 0 <= -nice <= cap
            factors = sum(
                int(row[k]) for k in ("site", "age", "fairshare", "jobsize", "partfactor", "qos")
            )
            # sprio rounds each factor: the sum of six within 3 of the priority
            assert abs(factors - nice - int(row["priority"])) <= 3, row
        # the order among one user's jobs is kept: the shorter limit, the larger boost
        for user in ("alice", "carol"):
            boosts = [-int(seen[jobs[user, limit]]["nice"]) for limit in LIMITS_MIN]
            assert boosts == sorted(boosts, reverse=True), (user, boosts)
        # fair-share outranks the boost: carol's 7-day job over alice's 10-minute one,
        # whose raw boosts differ by more than fair-share's whole weight
        short, long_ = seen[jobs["alice", "10"]], seen[jobs["carol", "7-0"]]
        assert raw_boost(10) - raw_boost(7 * 1440) > CFG.weight_fairshare
        fs_gap = int(long_["fairshare"]) - int(short["fairshare"])
        assert fs_gap > cap, f"fair-share gap {fs_gap}: the usage step did not separate them"
        assert int(long_["priority"]) > int(short["priority"]), (short, long_)
        assert cap < CFG.weight_fairshare
        assert cap < BOOST_SPANS * SHORT_FIRST_SPAN  # the cap is what bounds it here
