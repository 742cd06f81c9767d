"""The service: a scheduler loop beside slurmctld that applies defrag plans through Slurm.

Modules, one job each:

* :mod:`.settings` — typed settings (TOML file + ``SLURM_DEFRAG_*`` environment);
* :mod:`.audit` — the writer decorator that records every Slurm command;
* :mod:`.history` — the limits' :class:`PreemptionHistory` read from the plans table;
* :mod:`.executor` — the plan protocol, one step at a time, recorded before and after;
* :mod:`.packing` — node weights that steer small jobs onto used nodes;
* :mod:`.killswitch` — the file whose presence stops all action;
* :mod:`.loop` — one cycle: lease, read, persist, advance or plan, act;
* :mod:`.http` — ``POST /trigger`` and ``GET /healthz`` on localhost;
* :mod:`.runner` — APScheduler job, lease renewal, clean stop;
* :mod:`.logs` — text or JSON log lines; :mod:`.errors` — retry vs give up;
* :mod:`.wiring` — the composition root (the only place that knows every piece).

Design notes: ``docs/service.md``.
"""
