"""Record a site-like accounting history on a compose cluster, for ``simulate --workload``.

Issue #41 item 4 asks for real ``sacct`` input, not hand-written files: this script runs a
seeded workload of every kind of record a site's accounting holds (single- and multi-GPU
jobs of alice, bob and carol in their accounts, job arrays, two-node jobs, a job that
times out, jobs that fail, jobs cancelled while pending and while running, jobs requeued
while running), waits until the queue is empty, and writes what a site would export:

* ``sacct.txt``: ``TZ=UTC sacct -a -X -D -P -o <FIELDS> -S <start>``;
* ``sacct.json``: ``TZ=UTC sacct -a -X -D --json -S <start>`` (the release's data parser);
* ``snapshot.json``: the node inventory, read once by the cli backend;
* ``README.txt``: the Slurm version, the commands, the seed and the counts submitted.

Usage (a cluster of scripts/cluster.sh up; it must hold no other jobs)::

    SLURM_SUITE=trixie CLUSTER_PREFIX=mine .venv/bin/python bench/record_sacct.py OUT_DIR

About eight minutes: the time-out job needs its one-minute limit to pass.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / d) for d in ("tests", "tests/e2e")]

from live_cluster import cli_backend, ctld  # noqa: E402

FIELDS = (
    "JobID,JobName,User,Account,Partition,QOS,State,Submit,Start,End,Elapsed,Timelimit,"
    "NNodes,AllocCPUS,ReqCPUS,AllocTRES,ReqTRES,ReqMem,ExitCode"
)
USERS = ("alice", "bob", "carol")
NAME = "sacct-rec"
SEED = 41
WAVES = 8
WAVE_S = 20


def submit(user: str, *opts: str, wrap: str) -> str:
    out = ctld("sbatch", "--parsable", "-J", NAME, *opts, "--wrap", wrap, user=user)
    return out.strip().split(";")[0]


def queued() -> list[str]:
    """``job state`` of every job of ours still queued."""
    out = ctld("squeue", "-h", "-n", NAME, "-o", "%i %T", check=False)
    return [line.strip() for line in out.splitlines() if line.strip()]


def wave(rng: random.Random, k: int, kinds: Counter[str]) -> None:
    for _ in range(rng.randint(7, 10)):  # single-node jobs of every size
        gpus = rng.choice((1, 1, 1, 2, 2, 4, 8))
        user = rng.choice(USERS)
        submit(
            user, "-p", "batch", f"--gres=gpu:{gpus}", "-c", str(rng.choice((1, 2, 4, 8))),
            "-t", str(rng.choice((1, 2, 5, 30))), wrap=f"sleep {rng.randint(4, 40)}",
        )  # fmt: skip
        kinds["single"] += 1
    submit(rng.choice(USERS), "-p", "batch", "--array=1-4", "--gres=gpu:1", "-t", "2",
           wrap=f"sleep {rng.randint(3, 12)}")  # fmt: skip
    kinds["array (4 tasks)"] += 1
    submit(rng.choice(USERS), "-p", "batch", "-N", "2", "--gres=gpu:2", "-t", "2",
           wrap="srun sleep 8")  # fmt: skip
    kinds["two nodes"] += 1
    submit(rng.choice(USERS), "-p", "batch", "--gres=gpu:1", "-t", "2", wrap="sleep 2; exit 3")
    kinds["failed"] += 1
    if k == 0:
        submit("carol", "-p", "batch", "--gres=gpu:1", "-t", "1", wrap="sleep 600")
        kinds["timeout"] += 1
    later = submit(rng.choice(USERS), "-p", "batch", "--gres=gpu:1", "--begin=now+1hour",
                   wrap="sleep 5")  # fmt: skip
    ctld("scancel", later)
    kinds["cancelled pending"] += 1


def running_one(user: str, *opts: str) -> str:
    job = submit(user, "-p", "batch", "--gres=gpu:1", "-t", "5", *opts, wrap="sleep 45")
    for _ in range(60):
        if ctld("squeue", "-h", "-j", job, "-o", "%T", check=False).strip() == "RUNNING":
            return job
        time.sleep(1)
    raise SystemExit(f"job {job} did not start within 60 s")


def main(out: Path) -> None:
    if queued():
        raise SystemExit(f"jobs named {NAME} are queued already: cancel them first")
    out.mkdir(parents=True, exist_ok=True)
    start = datetime.now(UTC).replace(microsecond=0)
    rng = random.Random(SEED)
    kinds: Counter[str] = Counter()
    cancel_me = running_one("bob")
    requeue_me = [running_one(u, "--requeue") for u in ("alice", "carol")]
    for k in range(WAVES):
        wave(rng, k, kinds)
        if k == 1:
            ctld("scancel", cancel_me)
            kinds["cancelled running"] += 1
            for job in requeue_me:
                ctld("scontrol", "requeue", job)
                kinds["requeued running"] += 1
        time.sleep(WAVE_S)
    deadline = time.monotonic() + 900
    while (left := queued()) and time.monotonic() < deadline:
        time.sleep(5)
    if left:
        raise SystemExit(f"still queued after 15 minutes: {left}")
    time.sleep(3)  # slurmdbd takes the last records
    since = start.strftime("%Y-%m-%dT%H:%M:%S")
    env = ("env", "TZ=UTC")
    text = ctld(*env, "sacct", "-a", "-X", "-D", "-P", "-o", FIELDS, "-S", since)
    (out / "sacct.txt").write_text(text, encoding="utf-8")
    js = ctld(*env, "sacct", "-a", "-X", "-D", "--json", "-S", since)
    (out / "sacct.json").write_text(js, encoding="utf-8")
    snap = cli_backend().snapshot()
    (out / "snapshot.json").write_text(snap.model_dump_json(indent=1), encoding="utf-8")
    version = ctld("scontrol", "--version").strip()
    records = len(json.loads(js).get("jobs", []))
    (out / "README.txt").write_text(
        f"{version}, recorded {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by bench/record_sacct.py "
        f"(seed {SEED}, {WAVES} waves every {WAVE_S} s; suite {os.environ.get('SLURM_SUITE')})\n"
        f"sacct.txt:   TZ=UTC sacct -a -X -D -P -o {FIELDS} -S {since}\n"
        f"sacct.json:  TZ=UTC sacct -a -X -D --json -S {since}\n"
        f"snapshot.json: slurm-defrag's cli backend, once, after the workload\n"
        f"submitted: {dict(sorted(kinds.items()))}; sacct records: {records}\n",
        encoding="utf-8",
    )
    print((out / "README.txt").read_text(encoding="utf-8"), end="")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: record_sacct.py OUT_DIR")
    main(Path(sys.argv[1]))
