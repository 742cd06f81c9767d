"""Diagnosis: who pays for a queue order by time limit? Wait by the limit users gave.

    .venv/bin/python bench/sim_wait_by_limit.py [--workload default] [--load 1.2]
        [--seeds 1] [--first-seed 42] [--policies first-fit]
        [--profile examples/profiles/short-first-all.toml ...]

``short-first-all.toml`` (job_submit.lua's short_first with ``all``) starts short limits first, so
the mean wait falls; the question an admin asks next is what the long jobs pay. This
replays Protocol B as ``sim_protocol_b.py --backfill all --user-limits --ckpt-share 0.25``
does (no defrag) and prints, per band of time limit, the measured jobs' mean, 95th
percentile and largest wait, for each policy.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from diagnosis_world import diagnosis_world, world_parser
from sim_wait_by_shape import _capture
from slurm_defrag.sim import protocol_b as pb
from slurm_defrag.sim.configuration import placements

PROFILES = Path(__file__).resolve().parents[1] / "examples" / "profiles"
BANDS_H = ((0.0, 1.0), (1.0, 3.0), (3.0, 6.0), (6.0, float("inf")))
"""Time-limit bands in hours (openb's run times are capped at 6 h: MaxTime)."""


def main() -> None:
    ap = world_parser(__doc__, "default", 1.2, 1)
    ap.add_argument("--policies", default="first-fit", help="registered placement policies")
    ap.add_argument("--profile", type=Path, action="append", help="profile files (repeat)")
    args = ap.parse_args()
    runs = placements(args.policies.split(","), args.profile or [PROFILES / "short-first-all.toml"])
    nodes, jobs, settings = diagnosis_world(args.workload, args.load)
    seen = _capture()
    print(f"{args.workload} {args.load}x: wait in hours by time limit, mean / p95 / max (jobs)")
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for policy in runs:
            pb.run_b(nodes, jobs, policy, seed, settings)
            records = seen["stats"].records  # type: ignore[attr-defined]
            end = seen["stats"].end_time  # type: ignore[attr-defined]
            by: dict[tuple[float, float], list[float]] = {b: [] for b in BANDS_H}
            for job, rec in zip(seen["jobs"], records, strict=True):  # type: ignore[call-overload]
                if not settings.warmup <= job.submit < settings.horizon:
                    continue
                w = (end - job.submit) if rec.end is None else rec.end - job.submit - job.duration
                limit_h = job.estimate / 3600
                band = next(b for b in BANDS_H if b[0] <= limit_h < b[1])
                by[band].append(w / 3600)
            parts = " | ".join(
                f"{lo:g}-{hi:g} h: {np.mean(v):.2f} / {np.percentile(v, 95):.2f} / "
                f"{max(v):.2f} ({len(v)})"
                for (lo, hi), v in by.items()
                if v
            )
            print(f"seed {seed} {policy.name}: {parts}")


if __name__ == "__main__":
    main()
