"""How much the planner's scope in Protocol A (nodes shown per call) changes the result.

    .venv/bin/python bench/sim_scope_check.py [--seed 42] [--scopes 32,128]

Runs packing + ``--defrag planner`` (1 % per step) on openb, no topology, once per scope
and prints unallocated %, requeues, victims dropped and wall time.
"""

from __future__ import annotations

import argparse

import repo_traces  # noqa: F401  (sets SLURM_DEFRAG_TRACES for a checkout)
from slurm_defrag import suite
from slurm_defrag.sim.planner_step import PlannerStep
from slurm_defrag.sim.protocol_a import run_a


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--scopes", default="32,128")
    args = ap.parse_args()
    nodes, jobs = suite.load(suite.Suite())
    for scope in (int(x) for x in args.scopes.split(",")):
        step = PlannerStep(shared_victims=True, scope_nodes=scope, solver_workers=1)
        r = run_a(nodes, jobs, "packing", args.seed, defrag=step)
        print(
            f"scope {scope:5d}: unallocated {r.final_unallocated_pct:.2f} %, requeues "
            f"{r.requeues}, dropped {r.victims_dropped}, calls {r.defrag_calls}, "
            f"{r.wall_s:.0f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
