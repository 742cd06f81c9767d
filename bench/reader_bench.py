"""Benchmark: the cli backend's read of a long queue (the readers' hot path).

    PYTHONPATH=src python bench/reader_bench.py --jobs 5000 [--release 24.11] [--text-only]

The recorded compose cluster of ``--release`` (tests/fixtures/slurm-<release>/: 4 nodes,
8 running and 2 pending jobs) with its pending jobs copied until the queue holds
``--jobs`` jobs (new ids, new names; the running jobs and every node as recorded), then
``CliSlurm.snapshot()`` on it: ``squeue --json`` read and cross-checked against
``scontrol show job -d`` text (the default), or the text alone (``--text-only``, as on a
Slurm without ``--json``). Slurm's own time is not in it: every command answers from
memory. Prints the process CPU seconds of the best of ``--repeat`` reads.

Paired comparison of two checkouts (whole-process CPU ratio, same run)::

    for i in 1 2 3; do for t in OLD NEW; do
        PYTHONPATH=$t/src python $t/bench/reader_bench.py --jobs 5000; done; done
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from slurm_defrag.slurm.cli_backend import CliSlurm
from slurm_defrag.slurm.connection import SlurmSettings
from slurm_defrag.slurm.parse.scontrol_text import job_records, one_line

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
MICRO = {"22.05": 8, "24.11": 5, "26.05": 5}


def long_queue(base: Path, jobs: int) -> dict[str, str]:
    """Command line -> stdout, for the job commands, with ``jobs`` jobs in the queue."""
    doc = json.loads((base / "squeue_--json.json").read_text(encoding="utf-8"))
    records = doc["jobs"]
    pending = [j for j in records if "PENDING" in j["job_state"]]
    text = (base / "scontrol_show_job_-d.txt").read_text(encoding="utf-8")
    blocks = {int(b.split()[0].split("=")[1]): b for b in text.strip().split("\n\n")}
    next_id = max(j["job_id"] for j in records) + 1
    out_json, out_text = list(records), list(blocks.values())
    while len(out_json) < jobs:
        src = pending[len(out_json) % len(pending)]
        new = copy.deepcopy(src)
        old_id, new["job_id"], new["name"] = src["job_id"], next_id, f"copy{next_id}"

        def renamed(s: str, old: int = old_id, nid: int = next_id) -> str:
            s = re.sub(rf"\bJobId={old}\b", f"JobId={nid}", s)
            return re.sub(r"\bJobName=\S+", f"JobName=copy{nid}", s, count=1)

        out_json.append(new)
        out_text.append(renamed(blocks[old_id]))
        next_id += 1
    doc["jobs"] = out_json
    # the one-line form of each record (-o), made from the record itself so both agree
    out_one = [one_line(r) for r in job_records("\n\n".join(out_text) + "\n\n")]
    single = {
        f"scontrol show job -d {b.split()[0].split('=')[1]}": b + "\n\n" for b in out_text
    } | {f"scontrol show job -d -o {ln.split()[0].split('=')[1]}": ln + "\n" for ln in out_one}
    return single | {
        "squeue --json": json.dumps(doc),
        "scontrol show job -d": "\n\n".join(out_text) + "\n\n",
        "scontrol show job -d -o": "\n".join(out_one) + "\n",
        "squeue --noheader --all --states=all --format=%A": "".join(
            f"{j['job_id']}\n" for j in out_json
        ),
    }


class Replay:
    def __init__(self, base: Path, release: str, queue: dict[str, str], text_only: bool) -> None:
        self.base, self.release, self.queue, self.text_only = base, release, queue, text_only

    def __call__(self, argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        argv, line = list(argv), " ".join(argv)
        if self.text_only and "--json" in argv:
            return subprocess.CompletedProcess(argv, 1, "", "unrecognized option '--json'")
        if line in self.queue:
            return subprocess.CompletedProcess(argv, 0, self.queue[line], "")
        if argv == ["scontrol", "--version"]:
            version = f"slurm-wlm {self.release}.{MICRO[self.release]}\n"
            return subprocess.CompletedProcess(argv, 0, version, "")
        stem = "_".join(argv)
        for suffix, rc in ((".json", 0), (".txt", 0), (".ERROR.txt", 1)):
            path = self.base / (stem + suffix)
            if path.exists():
                text = path.read_text(encoding="utf-8")
                return subprocess.CompletedProcess(argv, rc, "" if rc else text, text if rc else "")
        if argv == ["scontrol", "show", "config"]:
            return subprocess.CompletedProcess(argv, 0, "TopologyPlugin = topology/default\n", "")
        raise SystemExit(f"no recording for {line!r} in {self.base}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--release", default="24.11", choices=sorted(MICRO))
    ap.add_argument("--text-only", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    base = FIXTURES / f"slurm-{args.release}"
    queue = long_queue(base, args.jobs)
    runner = Replay(base, args.release, queue, args.text_only)
    settings = SlurmSettings(gres_conf=base / "config" / "gres.conf")
    best = float("inf")
    for _ in range(args.repeat):
        start = time.process_time()
        snap = CliSlurm(settings, runner=runner).snapshot()
        best = min(best, time.process_time() - start)
    assert len(snap.jobs) == args.jobs, len(snap.jobs)
    how = "text only" if args.text_only else "JSON + text cross-check"
    print(f"reader {args.release} {how}: {args.jobs} jobs, best of {args.repeat}: {best:.3f} s CPU")


if __name__ == "__main__":
    main()
