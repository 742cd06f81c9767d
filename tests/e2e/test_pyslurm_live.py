"""Live: ``snapshot --backend cli|rest|pyslurm`` agree on one cluster state (issue #18).

Only on a suite whose service image carries pyslurm (s2511: Slurm 25.11 built from source,
pyslurm 25.11 compiled against it). The three snapshots are read in one throwaway container
of the service image, sharing slurmctld's network namespace like the service does; a fourth,
cli again, shows the state did not change meanwhile. They must be equal as JSON, except the
partitions' PreemptMode, which only pyslurm reports.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import pytest
from live_cluster import (
    CTLD,
    DOCKER,
    PYSLURM_SUITES,
    SUITE,
    cluster_is_up,
    exclusive_cluster,
    token,
)

from infra import require

# newsuite: the pyslurm parity check is part of what a new Slurm suite runs (skipped
# where the service image has no pyslurm)
pytestmark = [pytest.mark.slurm, pytest.mark.newsuite]

# cli, rest (slurmrestd by its compose name, a root JWT), pyslurm, cli again
READ = r"""
set -e
for b in cli rest pyslurm cli; do
  case $b in
  rest) extra="--rest-url http://slurmrestd:6820 --token-file /run/token" ;;
  *) extra="" ;;
  esac
  slurm-defrag snapshot --backend "$b" $extra --gres-conf /etc/slurm/gres.conf --json
  echo
done
"""


def read_all() -> list[dict[str, Any]]:
    argv = [
        DOCKER, "run", "--rm", "-i", "--network", f"container:{CTLD}", "-e", "DEFRAG_USER=root",
        f"slurm-defrag/defrag:{SUITE}",
        "bash", "-c", f"printf %s '{token()}' >/run/token; {READ}",
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    snaps, text, decoder = [], proc.stdout.strip(), json.JSONDecoder()
    while text:  # four (indented) JSON documents one after another
        doc, end = decoder.raw_decode(text)
        snaps.append(doc)
        text = text[end:].lstrip()
    assert [s["source"] for s in snaps] == ["cli", "rest", "pyslurm", "cli"]
    for s in snaps:
        del s["source"], s["taken_at"]
    return snaps


def test_cli_rest_and_pyslurm_snapshots_are_equal() -> None:
    if SUITE not in PYSLURM_SUITES:
        pytest.skip(f"the service image of suite {SUITE} has no pyslurm")
    require(cluster_is_up(), "the compose Slurm cluster")
    with exclusive_cluster():
        for _ in range(5):
            cli, rest, py, again = read_all()
            if cli == again:
                break
            time.sleep(2)
        else:
            pytest.fail("the cluster kept changing between reads")
    assert cli == rest
    assert [p["preempt_mode"] for p in py["partitions"]] == ["REQUEUE", "OFF"]
    assert {**py, "partitions": cli["partitions"]} == cli
