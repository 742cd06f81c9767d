"""Live: ``GET /metrics`` of ``slurm-defrag serve --mode dry-run`` on the compose cluster.

Two jobs of ours hold 6 of the 8 A100 GPUs of node01 and of node02, and a third asks for 3
A100 GPUs: 4 are free, no node has 3, so it is falsely starved (spatial). The scrape must
then agree with ``scontrol show node -d`` read around it: free GPUs per partition and GPU
model (Gres total − GresUsed, per node, summed), GPUs per partition and model; and every
series that docs/observability.md lists must be there. Other people's jobs may change the
cluster between the two reads: then the comparison is simply taken again.
"""

from __future__ import annotations

import re
import signal
import time
from collections import defaultdict
from pathlib import Path

import pytest
from host_service import free_port, scrape, start
from live_cluster import (
    cluster_is_up,
    ctld,
    exclusive_cluster,
    job_states,
    node_states,
    sbatch,
    wait_evaluated,
    wait_running,
)

from infra import ROOT, require

pytestmark = pytest.mark.slurm

Key = tuple[str, str]  # (partition, gpu_model)
_GRES = re.compile(r"^gpu:([^:(]+):(\d+)")


def scontrol_gpus() -> tuple[dict[Key, int], dict[Key, int]]:
    """(GPUs, free GPUs) per (partition, model) from ``scontrol show node -d``."""
    total: dict[Key, int] = defaultdict(int)
    free: dict[Key, int] = defaultdict(int)
    for block in ctld("scontrol", "show", "node", "-d").split("\n\n"):
        fields = dict(tok.partition("=")[::2] for tok in block.split() if "=" in tok)
        gres = _GRES.match(fields.get("Gres", ""))
        if gres is None:
            continue  # no GPUs on this node
        used = _GRES.match(fields.get("GresUsed", ""))
        model, count = gres[1], int(gres[2])
        for partition in fields.get("Partitions", "").split(","):
            total[(partition, model)] += count
            free[(partition, model)] += count - (int(used[2]) if used else 0)
    return dict(total), dict(free)


def by_key(samples: list[tuple[dict[str, str], float]]) -> dict[Key, int]:
    return {(lab["partition"], lab["gpu_model"]): int(v) for lab, v in samples}


def documented_series() -> set[str]:
    text = (ROOT / "docs" / "observability.md").read_text()
    return set(re.findall(r"`(slurm_defrag_[a-z0-9_]+)` \| (gauge|counter|histogram)", text))


def _wait_for_new_snapshot(port: int, after: float, timeout_s: float = 90) -> None:
    """Until a snapshot read after ``after`` is exported and a cycle has been counted: the
    snapshot's gauges are set while its cycle still runs, the cycle counter when it ends
    (on a loaded machine a scrape fell in between)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            got = scrape(port)
        except OSError:
            got = {}  # the server is not up yet
        stamp = got.get("slurm_defrag_snapshot_timestamp_seconds")
        cycles = sum(v for _, v in got.get("slurm_defrag_cycles_total", []))
        if stamp and stamp[0][1] >= after and cycles >= 1:
            return
        time.sleep(0.5)
    raise AssertionError(f"no snapshot read after {after} within {timeout_s:g} s")


def test_metrics_agree_with_scontrol(tmp_path: Path) -> None:
    require(cluster_is_up(), "the compose Slurm cluster (scripts/cluster.sh up)")
    ours: list[str] = []
    port = free_port()
    asked = time.monotonic()
    with exclusive_cluster():
        print(f"\nmetrics live: cluster lock after {time.monotonic() - asked:.0f} s")
        states = node_states()
        busy = {n: s for n, s in states.items() if n in ("node01", "node02") and s != "idle"}
        require(not busy, f"idle node01 and node02 (now: {busy})")
        service = start(tmp_path, port)
        try:
            for node in ("node01", "node02"):
                ours.append(
                    sbatch(
                        "-w",
                        node,
                        "--gres=gpu:a100:6",
                        "-t",
                        "5",
                        "-J",
                        "metrics-e2e-hold",
                        wrap="sleep 300",
                    )
                )
            wait_running(ours)
            print(f"metrics live: our jobs running after {time.monotonic() - asked:.0f} s")
            starved = sbatch("--gres=gpu:a100:3", "-t", "5", "-J", "metrics-e2e-T", wrap="sleep 30")
            ours.append(starved)
            wait_evaluated(starved)
            assert job_states([starved])[starved] == "PENDING"
            got = _agreeing_scrape(port)
            print(f"metrics live: agreeing scrape after {time.monotonic() - asked:.0f} s")
        finally:
            if ours:
                ctld("scancel", *ours, check=False)
            service.send_signal(signal.SIGTERM)
            code = service.wait(timeout=60)
    log = (tmp_path / "serve.log").read_text()
    assert code == 0, log

    # Our starving job is among the falsely starved of batch / a100 / spatial.
    starving = {
        (lab["partition"], lab["gpu_model"], lab["reason"]): v
        for lab, v in got["slurm_defrag_falsely_starved_jobs"]
    }
    assert starving.get(("batch", "a100", "spatial"), 0) >= 1, starving
    # This instance holds the lease and runs cycles; the dry-run cycle planned for our job.
    assert got["slurm_defrag_up"][0][1] == 1
    assert got["slurm_defrag_lease_held"][0][1] == 1
    modes = {lab["mode"]: v for lab, v in got["slurm_defrag_mode"]}
    assert modes == {"off": 0, "dry-run": 1, "enforce": 0}
    assert sum(v for _, v in got["slurm_defrag_cycles_total"]) >= 1
    assert sum(v for _, v in got["slurm_defrag_slurm_errors_total"]) == 0, log
    for name, kind in documented_series():
        sample = name + ("_count" if kind == "histogram" else "")
        assert got.get(sample), f"{sample} ({kind}) documented but not exported"


def _agreeing_scrape(port: int, tries: int = 5) -> dict[str, list[tuple[dict[str, str], float]]]:
    """A scrape of a snapshot read between two identical scontrol reads."""
    seen = []
    for _ in range(tries):
        before = scontrol_gpus()
        # Cycles run every 5 s (a /trigger during a running cycle would be dropped).
        started = time.time()
        _wait_for_new_snapshot(port, started)  # taken_at: when the service began reading
        got = scrape(port)
        after = scontrol_gpus()
        if before != after:
            seen.append("cluster changed between the reads")
            continue  # a foreign job started or ended meanwhile: read again
        total, free = before
        exported = by_key(got["slurm_defrag_free_gpus"]), by_key(got["slurm_defrag_gpus"])
        if exported == (free, total):
            print(f"\nmetrics live: free GPUs per (partition, model) = {free}")
            return got
        seen.append(f"scontrol free {free} total {total}; /metrics {exported}")
    raise AssertionError("no agreeing scrape: " + "; ".join(seen))
