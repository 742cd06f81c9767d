"""Deterministic work counts of fixed scenarios: the guard against the next slowdown.

Timings on a shared 2-core machine move by 2x with the neighbours, so the guard does not
time anything. It counts work that the code alone decides (issue #42):

* ``calls``: Python function calls, C builtins included (cProfile's total);
* ``peak_kib``: the Python heap's peak while the scenario runs (tracemalloc);
* ``options``: placements in the CP-SAT model (planner scenarios);
* ``modules``: modules imported (CLI start-up).

Each scenario runs in a fresh interpreter with ``PYTHONHASHSEED=0`` (memo tables of
earlier tests or runs would make the counts depend on test order), its input built before
counting starts. ``test_work_counts.py`` compares the counts with the ones recorded in
``work_counts.json`` and fails when one moves by more than :data:`TOLERANCE`: a change
that costs more must record it in the same change, where the diff shows it (and a change
that saves records that too, or the band would hide the next regression). Timings stay in
``bench/`` and docs/benchmarks.md.

Refresh the file after a change that moves a count on purpose::

    PYTHONPATH=src .venv/bin/python tests/project/work_counts.py --write            # all
    PYTHONPATH=src .venv/bin/python tests/project/work_counts.py --write plan-1k-50  # one

Only the standard library is imported at module level: the CLI scenario counts the
modules that ``slurm-defrag --help`` loads, from a bare interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RECORD = HERE / "work_counts.json"
TOLERANCE = 0.25
"""How far a count may move from the recorded one, either way."""

Counts = dict[str, int]


# -- scenarios: each builds its input, then returns what to count (a call) --------------


def _planner(nodes: int, targets: int) -> Callable[[], Callable[[], Counts]]:
    def setup() -> Callable[[], Counts]:
        sys.path.insert(0, str(ROOT / "bench"))
        from planner_bench import POLICY, busy_cluster
        from slurm_defrag.planner.facade import make_plan
        from slurm_defrag.policy.file import parse_policy

        snap, ids = busy_cluster(nodes, targets, 1)
        # No wall cap: a profiled plan on a loaded machine must not stop on the clock
        # (the counts would then depend on the machine). The work budget still bounds it.
        solver = {**POLICY["solver"], "max_time_in_seconds": 86_400}  # type: ignore[dict-item]
        policy = parse_policy({**POLICY, "solver": solver})

        def run() -> Counts:
            plan = make_plan(snap, policy, ids)
            return {"options": plan.solver.options}

        return run

    return setup


def _course() -> Callable[[], Counts]:
    from slurm_defrag.planner.facade import make_plan
    from slurm_defrag.policy.file import default_policy
    from slurm_defrag.snapshot_file import load_snapshot

    snap = load_snapshot(ROOT / "examples" / "course.json")
    policy = default_policy()

    def run() -> Counts:
        return {"options": make_plan(snap, policy).solver.options}

    return run


def _metrics() -> Callable[[], Counts]:
    from slurm_defrag.metrics.compute import compute
    from slurm_defrag.synth import random_cluster

    snap = random_cluster(10_000, seed=1, fill=0.92, pending=50)  # bench/metrics_bench.py's

    def run() -> Counts:
        compute(snap)
        return {}

    return run


def _cli_help() -> Callable[[], Counts]:
    before = set(sys.modules)

    def run() -> Counts:
        import contextlib
        import io

        with contextlib.redirect_stdout(io.StringIO()):
            from slurm_defrag.cli import main

            sys.argv = ["slurm-defrag", "--help"]
            with contextlib.suppress(SystemExit):
                main()
        return {"modules": len(set(sys.modules) - before)}

    return run


@dataclass(frozen=True)
class Scenario:
    setup: Callable[[], Callable[[], Counts]]
    memory: bool = True
    """Count the heap's peak too. tracemalloc makes a run 4x longer: the 3,000-node plan
    counts calls only (the 10,000-node one, slow anyway, counts its memory)."""
    slow: bool = False
    """Too long for ``scripts/test.sh --fast``: its test is marked slow (CI runs it)."""


SCENARIOS: dict[str, Scenario] = {
    "plan-course": Scenario(_course),
    "plan-1k-50": Scenario(_planner(1000, 50)),
    "plan-3k-150": Scenario(_planner(3000, 150), memory=False),
    "plan-10k-500": Scenario(_planner(10_000, 500), slow=True),
    "metrics-10k": Scenario(_metrics),
    "cli-help": Scenario(_cli_help),
}


# -- sabotage: the guard's own test slows a function down on purpose ------------------


def _sabotage(name: str) -> None:
    """Make the code do more work, as a regression would (see test_work_counts.py)."""
    if name == "protection-full-scan":
        # The regression of issue #42 put back: every eligible node priced for every
        # target, no early stop (what b3831a5 did).
        from slurm_defrag.planner.protection_cost import ProtectionCosts, Waived

        def full_scan(
            self: ProtectionCosts, eligible: list[int], g: Any, cost_now: float | None
        ) -> Waived | None:
            del cost_now
            best: Waived | None = None
            for n in eligible:
                w = self._waived_on(n, g)
                if w is not None and (best is None or (w.cost, w.node) < (best.cost, best.node)):
                    best = w
            return best

        ProtectionCosts._cheapest = full_scan  # type: ignore[method-assign]
    elif name == "cli-imports-the-planner":
        # A command module importing the planner at module level, as they used to.
        import slurm_defrag.planner.facade  # noqa: F401
    else:
        raise SystemExit(f"unknown sabotage {name!r}")


# -- measuring ----------------------------------------------------------------------


def measure_here(name: str, sabotage: str | None = None) -> Counts:
    """Run scenario ``name`` in this interpreter and count (see the module docstring)."""
    import cProfile
    import gc
    import tracemalloc

    scenario = SCENARIOS[name]
    run = scenario.setup()
    if sabotage:
        _sabotage(sabotage)
    gc.collect()
    if scenario.memory:
        tracemalloc.start()
    profile = cProfile.Profile()
    profile.enable()
    extra = run()
    profile.disable()
    counts: Counts = {}
    if scenario.memory:  # before the profile is read (that allocates)
        counts["peak_kib"] = tracemalloc.get_traced_memory()[1] // 1024
        tracemalloc.stop()
    # From the profiler's own entries, one per code object: pstats keys its table by
    # (file, line, name) and keeps one of several code objects sharing a label (every
    # dataclass's generated __hash__ is "<string>:2"), which one depending on the run.
    counts["calls"] = sum(e.callcount for e in profile.getstats())
    return counts | extra


def measure(name: str, sabotage: str | None = None) -> Counts:
    """Scenario ``name`` in a fresh interpreter (fixed hash seed, fixed terminal width)."""
    argv = [sys.executable, str(Path(__file__)), "--measure", name]
    if sabotage:
        argv += ["--sabotage", sabotage]
    env = {**os.environ, "PYTHONHASHSEED": "0", "COLUMNS": "100", "TERM": "dumb"}
    env.pop("FORCE_COLOR", None)
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"{name}: exit {out.returncode}\n{out.stderr}")
    counts: Counts = json.loads(out.stdout.strip().splitlines()[-1])
    return counts


def recorded() -> dict[str, Counts]:
    data: dict[str, Any] = json.loads(RECORD.read_text())
    return {k: v for k, v in data.items() if not k.startswith("_")}


def compare(name: str, want: Counts | None, got: Counts) -> list[str]:
    """What moved by more than :data:`TOLERANCE` (empty: within the band)."""
    if want is None:
        return [f"{name}: no recorded counts; record them: {_refresh(name)}"]
    problems = []
    for key in sorted(set(want) | set(got)):
        old, new = want.get(key), got.get(key)
        if old is None or new is None:
            problems.append(f"{name}.{key}: recorded {old}, measured {new}")
        elif new > old * (1 + TOLERANCE):
            problems.append(
                f"{name}.{key}: {new} is {new / old - 1:+.0%} over the recorded {old}: "
                "find the extra work, or record the cost in this change"
            )
        elif new < old * (1 - TOLERANCE):
            problems.append(
                f"{name}.{key}: {new} is {new / old - 1:+.0%} under the recorded {old}: "
                "record the saving in this change (else the band hides the next regression)"
            )
    if problems:
        problems.append(f"refresh: {_refresh(name)}")
    return problems


def _refresh(name: str) -> str:
    return f"PYTHONPATH=src .venv/bin/python tests/project/work_counts.py --write {name}"


def write(names: list[str]) -> None:
    data: dict[str, Any] = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    for name in names:
        data[name] = measure(name)
        print(f"{name}: {data[name]}", flush=True)
    data["_about"] = (
        "Work counts of fixed scenarios (tests/project/work_counts.py); "
        "test_work_counts.py fails when one moves by more than 25 %."
    )
    RECORD.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--measure", metavar="SCENARIO", help="count one scenario, print JSON")
    ap.add_argument("--sabotage", help="slow a function down first (the guard's test)")
    ap.add_argument("--write", nargs="*", metavar="SCENARIO", help="record (default: all)")
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure_here(args.measure, args.sabotage)))
    elif args.write is not None:
        write(args.write or list(SCENARIOS))
    else:
        ap.error("--measure or --write")


if __name__ == "__main__":
    main()
