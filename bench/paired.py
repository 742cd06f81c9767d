"""Paired timing: one bench command against two commits, alternating, in the same run.

    python bench/paired.py --old 4957bf7 --new HEAD --rounds 3 -- \\
        bench/planner_bench.py --nodes 10000 --targets 50

On a shared machine a single timing says more about the neighbours than about the code;
a ratio of two runs taken side by side says less about them. Each commit's ``src/`` is
exported (``git archive``) to a temporary directory, and the command (a Python script and
its arguments, the script taken from the working tree so both sides run the same bench;
``--own-bench``: each commit's own copy of it)
runs ``--rounds`` times per commit, old and new alternating, each in a fresh interpreter
with ``PYTHONPATH`` on that commit's tree. Reported per side: the minimum over the rounds
of the whole process's CPU time (user + system, children included: CP-SAT's threads
count) and of its wall time, and the ratio new / old of the CPU minima. The
command's own output of the last round is printed for each side, so its figures (plan
times, bounds, compute times, peak RSS where the bench prints it) can be read as well.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Run:
    cpu: float
    wall: float
    out: str


def export(commit: str, where: Path) -> Path:
    """The tree of ``commit`` (``src/`` and ``bench/``) under ``where``, or the working
    tree for ``WORKTREE``; returns the tree's root."""
    if commit == "WORKTREE":
        return ROOT
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "src", "bench"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return where


def run_once(tree: Path, argv: list[str], nice: int, own_bench: bool) -> Run:
    bench = (tree if own_bench else ROOT) / "bench"
    env = {**os.environ, "PYTHONPATH": f"{tree / 'src'}{os.pathsep}{bench}"}
    if own_bench and argv and argv[0].startswith("bench/"):
        argv = [str(tree / argv[0]), *argv[1:]]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        ["nice", "-n", str(nice), sys.executable, *argv],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({proc.returncode}) on {tree}:\n{proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(cpu, wall, proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--old", required=True, help="commit, or WORKTREE")
    ap.add_argument("--new", default="WORKTREE", help="commit, or WORKTREE (default)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--nice", type=int, default=19, help="niceness of the bench processes")
    ap.add_argument(
        "--own-bench",
        action="store_true",
        help="run each commit's own copy of a bench/ script (when the working tree's "
        "no longer runs on the old code, e.g. a policy key it does not know)",
    )
    ap.add_argument(
        "--figure",
        action="append",
        default=[],
        metavar="NAME=REGEX",
        help="a number the command prints (the regex's first group), e.g. "
        "'plan=plan: ([0-9.]+) s wall': its minimum over the rounds is reported per side "
        "(repeatable; every match of a round counts)",
    )
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- script.py [args]")
    args = ap.parse_args()
    argv = [a for a in args.command if a != "--"] if args.command else []
    if not argv:
        ap.error("give the bench command after --")
    with tempfile.TemporaryDirectory() as tmp:
        sides = {}
        for label, commit in (("old", args.old), ("new", args.new)):
            where = Path(tmp) / label
            where.mkdir()
            sides[label] = (commit, export(commit, where))
        runs: dict[str, list[Run]] = {"old": [], "new": []}
        for _ in range(args.rounds):
            for label in ("old", "new"):
                runs[label].append(run_once(sides[label][1], argv, args.nice, args.own_bench))
    load = os.getloadavg()
    own = " (each commit's own bench script)" if args.own_bench else ""
    print(f"command: {' '.join(argv)}{own}; {args.rounds} rounds, load average {load[0]:.1f}")
    for label in ("old", "new"):
        rs = runs[label]
        print(
            f"{label} {sides[label][0]}: CPU min {min(r.cpu for r in rs):.2f} s "
            f"(all: {', '.join(f'{r.cpu:.2f}' for r in rs)}), wall min "
            f"{min(r.wall for r in rs):.2f} s"
        )
        print("  " + rs[-1].out.strip().replace("\n", "\n  "))
    ratio = min(r.cpu for r in runs["new"]) / min(r.cpu for r in runs["old"])
    print(f"new / old CPU (min of {args.rounds}): {ratio:.2f}")
    for spec in args.figure:
        name, _, pattern = spec.partition("=")
        mins = {}
        for label in ("old", "new"):
            found = [float(m) for r in runs[label] for m in re.findall(pattern, r.out)]
            mins[label] = min(found) if found else float("nan")
        print(
            f"{name}: old min {mins['old']:.3f}, new min {mins['new']:.3f}, "
            f"new / old {mins['new'] / mins['old']:.2f}"
        )


if __name__ == "__main__":
    main()
