"""Protocol A with another workload-mix rule: bench/sim_protocol_a.py, the service's
MixEstimate keeping ``MAX_TYPES`` shapes up to ``COVERAGE`` of the jobs.

    .venv/bin/python bench/sim_protocol_a_mix_rule.py COVERAGE MAX_TYPES [sim_protocol_a flags]

e.g. ``1.0 64 --seeds 10 --overlays none --profile
examples/profiles/fgd-route-score-warm-30.toml --out /tmp/sim --name warm64_10``
(docs/benchmarks.md, "What we tried").
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import repo_traces  # noqa: F401  (sets SLURM_DEFRAG_TRACES for a checkout)
from slurm_defrag.packing import workload_mix

coverage, max_types = float(sys.argv[1]), int(sys.argv[2])
workload_mix.MixEstimate.__init__.__defaults__ = (workload_mix.KEEP_JOBS, max_types, coverage)
here = Path(__file__).resolve().parent
sys.argv = [str(here / "sim_protocol_a.py"), *sys.argv[3:]]
runpy.run_path(sys.argv[0], run_name="__main__")
