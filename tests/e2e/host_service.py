"""``slurm-defrag serve --mode dry-run`` as a process on this host, for live tests that read
its ``/metrics``: SQLite in the test's directory, Slurm through ``docker exec`` into
slurmctld (the cli backend), the compose cluster's gres.conf."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request
from collections import defaultdict
from pathlib import Path

from live_cluster import CTLD, DOCKER, GRES_CONF, slurm_defrag
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[str, list[tuple[dict[str, str], float]]]
"""sample name -> [(labels, value)]"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(tmp: Path, port: int, interval_s: int = 5) -> subprocess.Popen[bytes]:
    """The service, logging to ``tmp/serve.log``; stop it with SIGTERM."""
    db = f"sqlite:///{tmp / 'defrag.db'}"
    upgraded = slurm_defrag("db", "upgrade", "--db", db)
    assert upgraded.returncode == 0, upgraded.stderr
    config = tmp / "service.toml"
    config.write_text(
        f'mode = "dry-run"\ninterval_s = {interval_s}\ndb_url = {json.dumps(db)}\n'
        f"http_port = {port}\nkill_switch_file = {json.dumps(str(tmp / 'STOP'))}\n"
        f"[slurm]\ncommand_prefix = {json.dumps([DOCKER, 'exec', CTLD])}\n"
        f"gres_conf = {json.dumps(str(GRES_CONF))}\n"
    )
    exe = Path(sys.executable).parent / "slurm-defrag"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_DEFRAG_")}
    return subprocess.Popen(
        [str(exe), "serve", "--config", str(config)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(tmp / "serve.log").open("wb"),
    )


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: Samples = defaultdict(list)
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[s.name].append((s.labels, s.value))
    return out
