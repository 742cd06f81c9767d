"""What job_submit.lua adds at submit, from the real script, run through lupa (Lua 5.1).

The simulator does not mirror the hook in Python: it loads ``slurm-plugins/job_submit.lua``
into an embedded Lua 5.1 (the release Debian builds Slurm against), with a stub of the
``slurm`` table slurmctld provides and the node table ``slurm-defrag plugins render``
would write for the simulated cluster (its ``pack`` entry from
:func:`slurm_defrag.packing.node_levers.pack_table`, the one both use), and calls
``slurm_job_submit`` on a job description shaped like what sbatch sends for the job:
``--gres=gpu:K`` for whole GPUs, ``--gres=shard:S`` for a share of one GPU, nothing for
CPU only, one node. The ``--prefer`` it sets is copied to the job, and so is the
(negative) ``--nice`` of ``short_first`` (as a priority: under priority/multifactor nice
is subtracted from it), capped by the table's ``short_first.cap`` as on a site. The
answer depends only on that request shape, so it is computed once per shape.

With ``short_first.keep`` under a demand the answer also depends on the scarce jobs
submitted before (the script keeps them in its Lua state, as slurmctld does): every job
is asked, in submit order, the script's clock set to the job's submit time.

The table has ``enforce = false``: the hook must not refuse a trace job (a request no node
could ever satisfy is the simulator's to drop, as Protocol A does); refusals do not change
the hint.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from slurm_defrag.domain.units import MILLI
from slurm_defrag.errors import InputError
from slurm_defrag.hooks_location import candidates, plugins_dir
from slurm_defrag.packing.node_levers import SHARDS_PER_GPU, LeverSettings, mark_kept, pack_table
from slurm_defrag.sim.cluster_state import ClusterState
from slurm_defrag.sim.levers import SimLevers
from slurm_defrag.sim.model import JobSpec
from slurm_defrag.sim.snapshot_view import PARTITION

SCRIPT_ENV = "SLURM_DEFRAG_JOB_SUBMIT"
"""Path of job_submit.lua when not running from a checkout."""

_STUB = """
local s = { SUCCESS = 0, ERROR = -1, FAILURE = -1, NO_VAL = 4294967294, NO_VAL16 = 65534,
  NO_VAL8 = 254, INFINITE = 4294967295, JOB_SHARED_NONE = 0, JOB_SHARED_OK = 1 }
local function quiet() end
s.log_info, s.log_verbose, s.log_debug, s.log_user = quiet, quiet, quiet, quiet
DEFRAG_ERRORS = {}
s.log_error = function(fmt, ...) table.insert(DEFRAG_ERRORS, string.format(fmt, ...)) end
slurm = s
DEFRAG_NODES_FILE = "/nonexistent/defrag_nodes.lua"
"""


def default_script() -> Path:
    """job_submit.lua: ``$SLURM_DEFRAG_JOB_SUBMIT``, else this release's slurm-plugins/
    (:mod:`slurm_defrag.hooks_location`: the checkout, else the install prefix)."""
    env = os.environ.get(SCRIPT_ENV)
    if env:
        path = Path(env)
        path = path / "job_submit.lua" if path.is_dir() else path
        if path.is_file():
            return path
        raise InputError(f"job_submit.lua not found at {path} (from {SCRIPT_ENV})")
    found = plugins_dir()
    if found is None:
        tried = ", ".join(str(c) for c in candidates())
        raise InputError(f"job_submit.lua not found (tried {tried}): set {SCRIPT_ENV} to its path")
    return found / "job_submit.lua"


NICE_OFFSET = 2**31
"""Slurm stores a job's nice plus this (job_submit_lua.c)."""


def node_table(
    state: ClusterState,
    settings: LeverSettings,
    *,
    short_first: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    """defrag_nodes.lua for the simulated cluster: one partition, node types by GPU count
    and model, CPUs and memory (as ``plugins render`` writes them), the levers' ``pack``
    entry and the ``short_first`` one
    (:func:`~slurm_defrag.packing.node_levers.short_first_entry`)."""
    import hostlist

    types: dict[tuple[int, str, int, int], list[str]] = {}
    for s in state.nodes:
        if s.gpus:
            key = (s.gpus, s.model, s.cpu_milli // MILLI, s.memory_mib)
            types.setdefault(key, []).append(s.name)
    table: dict[str, Any] = {
        "version": 1,
        "default_partition": PARTITION,
        "enforce": False,
        "allow_protect": True,
        "partitions": {
            PARTITION: {
                "types": [
                    {
                        "gpus": g,
                        "models": {m: g},
                        "nodes": len(names),
                        "cpus": c,
                        "mem": mem,
                        "hosts": hostlist.collect_hostlist(names),
                    }
                    for (g, m, c, mem), names in sorted(
                        types.items(), key=lambda kv: (-kv[0][0], kv[0][1:])
                    )
                ]
            }
        },
    }
    pack = pack_table(settings)
    if pack is not None:
        table["pack"] = pack
    if short_first is not None:
        table["short_first"] = dict(short_first)
        if short_first.get("keep"):
            share = short_first["share"]
            assert isinstance(share, float)
            mark_kept(table["partitions"][PARTITION]["types"], share)
    return table


def request_of(job: JobSpec, *, full: bool = False) -> dict[str, Any]:
    """The job description fields sbatch would send for this job (one node). ``full``
    adds what only per-job routing and ``short_first`` read: ``--mem``, ``--time`` (in
    minutes, as Slurm holds it) and a GPU type when the job names exactly one model."""
    desc: dict[str, Any] = {
        "min_nodes": 1,
        "max_nodes": 1,
        "partition": PARTITION,
        "min_cpus": max(1, -(-job.cpu_milli // MILLI)),  # what -c/-n ask for, whole CPUs
    }
    model = ""
    if full:
        desc["pn_min_memory"] = job.memory_mib
        if job.time_limit is not None:
            desc["time_limit"] = max(1, -(-int(job.time_limit) // 60))
        if job.gpu_models is not None and len(job.gpu_models) == 1:
            model = next(iter(job.gpu_models)) + ":"
    if job.shared:
        desc["tres_per_node"] = f"gres/shard:{max(1, job.gpu_milli * SHARDS_PER_GPU // MILLI)}"
    elif job.num_gpu:
        desc["tres_per_node"] = f"gres/gpu:{model}{job.num_gpu}"
    return desc


@dataclass(frozen=True)
class Answer:
    """What job_submit.lua set on one submission."""

    prefer: str | None = None
    nice: int = 0
    """Added nice (0: none)."""
    exclude: frozenset[str] | None = None
    """Nodes in the ``--exclude`` it set (None: none)."""


class SubmitHook:
    """job_submit.lua loaded once; :meth:`apply` gives a job the ``--prefer`` and nice it
    sets."""

    def __init__(self, table: Mapping[str, Any], script: Path | None = None) -> None:
        try:
            from lupa import lua51
        except ImportError as e:  # the sim extra
            from slurm_defrag.extras import install_hint

            raise InputError(
                f"the slurm mode runs job_submit.lua through lupa: {install_hint('sim')}"
            ) from e
        self._lua = lua51.LuaRuntime(unpack_returned_tuples=True)
        src = (script or default_script()).read_text(encoding="utf-8")
        self._lua.execute(_STUB)
        self._lua.execute(src)
        self._lua.execute("DEFRAG_ERRORS = {}")  # the table file the stub names is missing
        g = self._lua.globals()
        out = g.slurm_defrag.prepare_table(self._lua.table_from(table, recursive=True))
        prepared, err = out if isinstance(out, tuple) else (out, None)
        if prepared is None:
            raise InputError(f"node table refused by job_submit.lua: {err}")
        g.slurm_defrag.nodes = prepared
        self._submit = g.slurm_job_submit
        self._cache: dict[tuple[str, ...], Answer] = {}
        self._routing = False
        self._full = "short_first" in table  # it reads --mem and --time
        keep = table.get("short_first", {}).get("keep")
        # keeping under demand: the answer depends on the scarce jobs submitted before,
        # in the simulator's time (the script's clock is the job's submit time)
        self._history = bool(keep and keep["demand"] > 0)
        self._lua.execute("slurm_defrag.clock = function() return SIM_NOW end")
        self.calls = 0

    def route(self, entry: Mapping[str, Any]) -> None:
        """A new cycle's ``route`` entry (:func:`slurm_defrag.packing.node_levers.route_table`),
        as slurmctld reloads the script when the service rewrites the table: from now on
        every job is asked (the answer depends on what came before it)."""
        d = self._lua.globals().slurm_defrag
        out = d.prepare_route(self._lua.table_from(entry, recursive=True))
        prepared, err = out if isinstance(out, tuple) else (out, None)
        if prepared is None:
            raise InputError(f"route table refused by job_submit.lua: {err}")
        d.nodes.route = prepared
        self._routing = True

    def prefer(self, job: JobSpec) -> str | None:
        """The ``--prefer`` job_submit.lua gives this job's request (None: none)."""
        return self.answer(job).prefer

    def answer(self, job: JobSpec) -> Answer:
        """What job_submit.lua sets for this job's request."""
        if self._routing or self._history:
            return self._ask(request_of(job, full=True), job.submit)
        desc = request_of(job, full=self._full)
        key = tuple(f"{k}={v}" for k, v in sorted(desc.items()))
        if key not in self._cache:
            self._cache[key] = self._ask(desc)
        return self._cache[key]

    def _ask(self, desc: Mapping[str, Any], now: float = 0.0) -> Answer:
        """One submission through the script, at ``now`` by its clock."""
        self.calls += 1
        self._lua.globals().SIM_NOW = now
        jd = self._lua.table_from(dict(desc))
        self._submit(jd, None, 0)
        self._raise_logged_errors()
        p, nice, exc = jd["prefer"], jd["nice"], jd["exc_nodes"]
        extra = int(nice) - NICE_OFFSET if nice is not None else 0
        return Answer(
            str(p) if p is not None else None,
            extra,
            _expand(str(exc)) if exc is not None else None,
        )

    def keep_level(self, now: float) -> float | None:
        """The demand job_submit.lua's keep window holds at ``now`` (None: no keeping)."""
        d = self._lua.globals().slurm_defrag
        level = d.keep_level(d.nodes, now)
        return None if level is None else float(level)

    def _raise_logged_errors(self) -> None:
        """The script fails open (an error becomes "no hint" in slurmctld); in the
        simulator that would quietly change the measurement, so it stops the run."""
        errors = self._lua.globals().DEFRAG_ERRORS
        if len(errors):
            raise RuntimeError(f"job_submit.lua logged an error: {errors[1]}")

    def apply(self, job: JobSpec) -> JobSpec:
        a = self.answer(job)
        if a.prefer == job.prefer and not a.nice and a.exclude is None:
            return job
        return replace(job, prefer=a.prefer, priority=job.priority - a.nice, exclude=a.exclude)


@functools.cache
def _expand(hosts: str) -> frozenset[str]:
    """The node names of an ``--exclude`` list (one per request shape: cached)."""
    import hostlist

    return frozenset(hostlist.expand_hostlist(hosts))


def routed(
    state: ClusterState,
    settings: LeverSettings,
    *,
    seen_mix: bool = False,
    short_first: Mapping[str, object] | None = None,
) -> tuple[Callable[[float], None], Callable[[JobSpec], JobSpec]]:
    """``fgd-route`` with a clock (Protocol B): one service cycle (the levers, then their
    table handed to job_submit.lua, as a rewritten table is reloaded) and the submit step
    (the script's ``--prefer`` for a job when it arrives; with ``seen_mix`` the service
    also counts it into its workload mix)."""
    levers = SimLevers(state, settings, seen_mix=seen_mix)
    hook = SubmitHook(node_table(state, settings, short_first=short_first))
    arrivals = itertools.count()

    def cycle(now: float) -> None:
        levers.apply(now)
        if levers.route is not None:
            hook.route(levers.route)

    def submit(job: JobSpec) -> JobSpec:
        job = hook.apply(job)
        levers.observe(str(next(arrivals)), job)
        return job

    return cycle, submit
